#!/usr/bin/env bash
# sample_cpu.sh PATTERN COMMAND...: runs COMMAND with STALL_MARKER naming a file that the drill's
# culprit creates as the stall begins (collective_stall.cpp) and, from 1.5 s after it appears (a
# waiting rank spins its first second, then sleeps) for 1 s, samples the CPU time of each process
# whose command line starts with PATTERN and whose environment holds this run's STALL_MARKER (under
# ctest -j2 another drill of the same program may be starting or spinning meanwhile): one line
# "cpu ticks <user+system ticks in that second> <state>" per process on stderr (100 ticks = a core). The window follows the stall, not the
# launch: on a loaded machine the ranks may take seconds to start, and a window a fixed time after
# the launch then caught them spinning their first second of the wait (or still starting).
# Without a marker (COMMAND ended first, or none within 30 s) nothing is sampled. Exits with
# COMMAND's status.
pattern=$1
shift
marker=$(mktemp -u "${TMPDIR:-/tmp}/ptrain_stall_marker.XXXXXX")
STALL_MARKER=$marker "$@" &
launch=$!
ticks() { awk '{ print $14 + $15, $3 }' "/proc/$1/stat" 2>/dev/null; }
start=$(date +%s%N)
for ((i = 0; i < 600; i++)); do
  [ -e "$marker" ] && break
  kill -0 "$launch" 2>/dev/null || break
  sleep 0.05
done
if [ -e "$marker" ]; then
  echo "sample_cpu: the stall began $((($(date +%s%N) - start) / 1000000)) ms after the launch" >&2
  sleep 1.5
  pids=$(for p in $(pgrep -f "^$pattern"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "STALL_MARKER=$marker" && echo "$p"
  done)
  declare -A before
  for p in $pids; do before[$p]=$(ticks "$p"); done
  sleep 1
  for p in $pids; do
    now=$(ticks "$p")
    [ -n "$now" ] && [ -n "${before[$p]}" ] && echo "cpu ticks $((${now% *} - ${before[$p]% *})) ${now#* }" >&2
  done
fi
wait $launch
status=$?
rm -f "$marker"
exit $status
