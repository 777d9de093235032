#!/usr/bin/env bash
# Starts the ranks of an MPI program as separate processes that meet by URL (no mpiexec), waits
# for them (bounded) and checks them:
#   url_launch.sh [OPTIONS] -- PROGRAM [ARGS...]
# Rank r gets MASTER_ADDR, MASTER_PORT, RANK=r, WORLD_SIZE; or, when ARGS hold @URL@, @RANK@ or
# @WORLD_SIZE@, those are replaced instead (the --init-url/--rank/--world-size flags).
# OPTIONS:
#   --world-size N     (default 2)
#   --leave-out R      rank R is not started (to check that the others end after the timeout)
#   --limit S          seconds before every process still running is killed (default 120)
#   --expect REGEX     a line of the output must match (grep -E; repeatable)
#   --fail REGEX       every rank must exit non-zero (not killed) and a line must match REGEX
#   --hosts            rank r runs in network namespace mpins<r> as host node<r> (10.77.0.<r+1>),
#                      rank 0's URL is 10.77.0.1 and MPI talks TCP (UCX_TLS=tcp) across the bridge;
#                      the test/slurm two_hosts testbed must be up (its fixture); root only
#   --min-bytes B      with --hosts: each namespace must send at least B bytes through the bridge
#   --preload LIB      LD_PRELOAD for the ranks (test/slurm/ucx_finalize_workaround.cpp)
# Exit 0 when all checks pass, 1 otherwise (after printing every rank's output), 77 when --hosts
# is asked for by a user other than root.
set -uo pipefail
world=2 leave_out=-1 limit=120 fail_regex="" hosts=0 min_bytes=0 preload=""
expects=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --world-size) world=$2; shift 2 ;;
    --leave-out) leave_out=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --fail) fail_regex=$2; shift 2 ;;
    --hosts) hosts=1; shift ;;
    --min-bytes) min_bytes=$2; shift 2 ;;
    --preload) preload=$2; shift 2 ;;
    *) echo "url_launch.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: url_launch.sh [OPTIONS] -- PROGRAM [ARGS...]" >&2; exit 2; }
start=$(seq 0 $((world - 1)) | grep -vx -- "$leave_out" | paste -sd' ')

if [ $hosts = 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "NOT RUN: the multi-host launch needs root (network namespaces)"
    exit 77
  fi
  for r in $start; do
    ip netns list | grep -qw "mpins$r" || { echo "FAILED: no network namespace mpins$r (is the two_hosts testbed up?)"; exit 1; }
  done
  addr=10.77.0.1
else
  addr=127.0.0.1
fi
# A port free now on this machine (rank 0 binds it a moment later).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
url=tcp://$addr:$port

work=$(mktemp -d /tmp/ptrain-url-launch.XXXXXX)
trap 'rm -rf "$work"' EXIT
sent() { cat /sys/class/net/vh0/statistics/rx_bytes /sys/class/net/vh1/statistics/rx_bytes 2>/dev/null | paste -sd' '; }
[ $hosts = 1 ] && read -ra before <<<"$(sent)"

echo "== $world ranks (started: $start) meet at $url: $*"
begin=$SECONDS
pids=()
for r in $start; do
  args=()
  by_flags=0
  for a in "$@"; do
    b=${a//@URL@/$url}
    b=${b//@RANK@/$r}
    b=${b//@WORLD_SIZE@/$world}
    [ "$b" != "$a" ] && by_flags=1
    args+=("$b")
  done
  vars=()
  [ $by_flags = 1 ] || vars=(MASTER_ADDR=$addr MASTER_PORT=$port RANK=$r WORLD_SIZE=$world)
  [ -z "$preload" ] || vars+=(LD_PRELOAD=$preload)
  if [ $hosts = 1 ]; then
    vars+=(UCX_TLS=tcp)
    ip netns exec "mpins$r" unshare --uts sh -c 'hostname "$0"; exec "$@"' "node$r" \
      env "${vars[@]}" timeout -k 5 "$limit" "${args[@]}" >"$work/rank$r.out" 2>&1 &
  else
    env "${vars[@]}" timeout -k 5 "$limit" "${args[@]}" >"$work/rank$r.out" 2>&1 &
  fi
  pids+=($!)
done
problems=()
i=0
for r in $start; do
  wait "${pids[$i]}"
  code=$?
  i=$((i + 1))
  echo "-- rank $r: exit $code"
  sed "s/^/   /" "$work/rank$r.out"
  if [ $code = 124 ] || [ $code = 137 ]; then
    problems+=("rank $r did not end within $limit s: killed")
  elif [ -z "$fail_regex" ] && [ $code != 0 ]; then
    problems+=("rank $r exited with status $code")
  elif [ -n "$fail_regex" ] && [ $code = 0 ]; then
    problems+=("rank $r exited 0 where every rank must fail")
  fi
done
elapsed=$((SECONDS - begin))
cat "$work"/rank*.out >"$work/all.out"
for regex in "${expects[@]}" ${fail_regex:+"$fail_regex"}; do
  grep -qE -- "$regex" "$work/all.out" || problems+=("no output line matches '$regex'")
done
if [ $hosts = 1 ]; then
  read -ra after <<<"$(sent)"
  sent0=$((after[0] - before[0])) sent1=$((after[1] - before[1]))
  echo "bytes sent through the bridge: node0 $sent0, node1 $sent1"
  [ "$sent0" -ge "$min_bytes" ] && [ "$sent1" -ge "$min_bytes" ] \
    || problems+=("a namespace sent fewer than $min_bytes bytes through the bridge: MPI did not cross it")
fi
if [ ${#problems[@]} -ne 0 ]; then
  printf 'FAILED: %s\n' "${problems[@]}"
  exit 1
fi
echo "PASSED in ${elapsed}s"
