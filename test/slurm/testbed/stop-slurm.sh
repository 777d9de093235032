#!/usr/bin/env bash
# Stops the daemons that start-slurm.sh / start-slurm-multinode.sh started, by their saved PIDs
# only (SLURMCI_ROOT=/tmp/slurmci-mn for the multi-node one), after cancelling jobs left running.
# All of them are signalled at once (a clean stop takes about 1.5 s instead of 4 one by one).
# Adapted from ../shared/testbed/stop-slurm.sh.
R=${SLURMCI_ROOT:-/tmp/slurmci}
if [ -s "$R/slurm.conf" ] && [ -s "$R/run/slurmctld.pid" ] && kill -0 "$(cat "$R/run/slurmctld.pid")" 2>/dev/null; then
  SLURM_CONF="$R/slurm.conf" timeout 10 scancel --full --quiet --user=root 2>/dev/null || true
fi
status=0
stop() { # pid files: TERM, up to 10 s, then KILL
  local f p pids=() names=() i
  for f in "$@"; do
    [ -s "$f" ] || continue
    p=$(cat "$f")
    if kill -0 "$p" 2>/dev/null; then kill -TERM "$p" && pids+=("$p") && names+=("$(basename "$f" .pid) ($p)"); fi
    rm -f "$f"
  done
  [ ${#pids[@]} -eq 0 ] && return
  for i in $(seq 1 100); do kill -0 "${pids[@]}" 2>/dev/null || break; sleep 0.1; done
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p"; done
  sleep 0.2
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then echo "could not stop ${names[$i]}" >&2; status=1
    else echo "stopped ${names[$i]}"; fi
  done
}
stop "$R"/run/slurmd*.pid "$R/run/slurmctld.pid" "$R/run/munged.pid"
exit $status
