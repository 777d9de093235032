# Sourced by the testbed scripts. Adapted from the team's ../shared/testbed/ scripts (checked on
# Debian 12 as root, 2 cores); ptrain's CI carries its own copy so that a fresh clone can start
# everything it tests against.

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Debian's slurm-wlm and munge, installed only when missing; waits for another apt holding the lock.
install_slurm() {
  local packages=()
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null \
    && command -v munged >/dev/null || packages+=(slurm-wlm munge)
  command -v ip >/dev/null || packages+=(iproute2)
  [ ${#packages[@]} -eq 0 ] && return 0
  echo "installing Debian packages ${packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The packages' own services (system munged, slurmctld, slurmd) must not start: ours run
  # from a private configuration, and nothing may stay up after the tests.
  local policy=/usr/sbin/policy-rc.d ours="" status=0
  if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' >$policy && chmod +x $policy && ours=1; fi
  local apt=(apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends "${packages[@]}")
  "${apt[@]}" >/dev/null 2>&1 || { apt-get -q -o DPkg::Lock::Timeout=300 update >/dev/null && "${apt[@]}" >/dev/null; } || {
    echo "could not install ${packages[*]} with apt-get" >&2; status=1; }
  [ -z "$ours" ] || rm -f $policy
  return $status
}

# Keeps a clean slate: when none of our daemons is alive, old job and node state is dropped.
fresh_state() {
  local R=$1 f
  for f in "$R"/run/*.pid; do alive "$f" && return 0; done
  rm -rf "$R/state" "$R/spool" "$R/run" "$R/log"
  mkdir -p "$R"/{munge,state,spool,log,run}
  chmod 700 "$R/munge"
}

start_munge() {
  local R=$1 _
  [ -s "$R/munge/munge.key" ] || mungekey --create --keyfile="$R/munge/munge.key" 2>/dev/null \
    || dd if=/dev/urandom of="$R/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$R/munge/munge.key"
  if ! alive "$R/run/munged.pid"; then
    rm -f "$R/munge/munge.socket.2"*
    # -F: stays in the foreground, so the PID we save is munged's own.
    setsid munged -F --force --key-file="$R/munge/munge.key" --socket="$R/munge/munge.socket.2" \
      --pid-file="$R/run/munged.pid.self" --log-file="$R/log/munged.log" \
      --seed-file="$R/munge/munged.seed" >>"$R/log/munged.out" 2>&1 </dev/null &
    echo $! >"$R/run/munged.pid"
  fi
  for _ in $(seq 1 100); do
    munge --socket="$R/munge/munge.socket.2" -n 2>/dev/null \
      | unmunge --socket="$R/munge/munge.socket.2" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "munged did not answer within 10 s" >&2
  return 1
}

# Before starting a daemon of ours: its fixed port must be free (another testbed may hold it).
need_free_port() {
  local R=$1 daemon=$2 port=$3
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "cannot start $daemon under $R: TCP port $port is already in use (another Slurm testbed?" \
         "stop it, or choose other ports with SLURMCI_CTLD_PORT / SLURMCI_D_PORT)" >&2
    return 1
  fi
}

dump_logs() {
  local R=$1 f
  echo "---- Slurm testbed logs under $R ----" >&2
  for f in "$R"/log/*; do
    [ -s "$f" ] || continue
    echo "== $f (last 30 lines)" >&2
    tail -n 30 "$f" >&2
  done
  echo "== sinfo" >&2
  sinfo -N -l >&2 2>&1 || true
}

# Waits (at most $3 seconds) until all $2 nodes are usable; resumes nodes that came up down.
wait_idle() {
  local R=$1 nodes=$2 limit=$3 start=$SECONDS up f
  while [ $((SECONDS - start)) -lt "$limit" ]; do
    for f in "$R"/run/*.pid; do
      alive "$f" && continue
      echo "$(basename "$f" .pid) (PID $(cat "$f" 2>/dev/null)) exited while Slurm was starting under $R" >&2
      dump_logs "$R"
      return 1
    done
    up=$(sinfo -h -N -o '%t' 2>/dev/null | grep -cE '^(idle|mix|alloc)$' || true)
    if [ "$up" = "$nodes" ]; then
      echo "slurm up under $R: $nodes node(s) idle ($((SECONDS - start)) s waiting)"
      return 0
    fi
    sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(down|drain|drng)$/ {print $1}' | while read -r node; do
      scontrol update nodename="$node" state=resume 2>/dev/null || true
    done
    sleep 0.5
  done
  echo "slurm did not come up under $R within $limit s" >&2
  dump_logs "$R"
  return 1
}
