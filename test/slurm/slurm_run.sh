#!/usr/bin/env bash
# Runs an MPI program on 2 ranks under a real Slurm and checks it:
#   slurm_run.sh srun      [OPTIONS] -- PROGRAM [ARGS...]   srun --mpi=pmi2 -N 1 -n 2
#   slurm_run.sh sbatch    [OPTIONS] -- PROGRAM [ARGS...]   sbatch --wait, mpiexec inside the job
#   slurm_run.sh two_hosts [OPTIONS] -- PROGRAM [ARGS...]   UCX_TLS=tcp srun --mpi=pmi2 -N 2 -n 2
#                                                           across the namespace "hosts"
# OPTIONS: --expect REGEX (repeatable), --limit SECONDS (default 120), --min-bytes B (default 0),
#          --preload LIB (LD_PRELOAD for the ranks only; see ucx_finalize_workaround.cpp),
#          --expect-failure (the launch must exit non-zero instead: a drill in which a rank dies).
# Passes when the launch exits 0 within the limit (a hang is killed, never waited on), its output
# matches every --expect (grep -E) and, for two_hosts, the ranks ran on 2 different host names
# with 2 different IPs and each host sent at least B bytes through the virtual network. Starts
# the testbed when it is not up (slurm_fixture.sh stop ... stops it). Exit 77 (skipped) when not
# root; 1 on any failure, after printing the output and the testbed's logs.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/harness.sh"
need_root

mode=${1:-}
shift || true
expects=()
min_bytes=0
limit=120
preload=""
expect_failure=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --expect) expects+=("$2"); shift 2 ;;
    --min-bytes) min_bytes=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --preload) preload=$2; shift 2 ;;
    --expect-failure) expect_failure=1; shift ;;
    *) echo "slurm_run.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] && shift
case $mode in srun | sbatch | two_hosts) ;; *) mode="" ;; esac
if [ -z "$mode" ] || [ $# -eq 0 ]; then
  echo "usage: slurm_run.sh srun|sbatch|two_hosts [--expect REGEX]... [--limit S] [--min-bytes B] [--preload LIB] -- PROGRAM [ARGS...]" >&2
  exit 2
fi

testbed=single
[ "$mode" = two_hosts ] && testbed=two_hosts
R=$(testbed_root $testbed)
testbed_start $testbed || { echo "FAILED: the Slurm testbed '$testbed' did not start"; exit 1; }

work=$(mktemp -d /tmp/ptrain-slurm-run.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=$work/output.txt
sent_by_host() { cat /sys/class/net/vh0/statistics/rx_bytes /sys/class/net/vh1/statistics/rx_bytes 2>/dev/null | paste -sd' '; }

echo "== $mode: $*"
if [ -n "$preload" ]; then
  [ -f "$preload" ] || { echo "FAILED: --preload $preload: no such file"; exit 1; }
  echo "   ranks preload $preload"
  export PTRAIN_SLURM_TASK_PRELOAD=$preload
fi
start=$SECONDS
case $mode in
  srun)
    timeout -k 10 "$limit" srun --mpi=pmi2 -N 1 -n 2 --kill-on-bad-exit=1 --job-name=ptrain-test \
      "$HERE/task_wrapper.sh" "$@" >"$out" 2>&1
    rc=$?
    ;;
  two_hosts)
    read -ra before <<<"$(sent_by_host)"
    UCX_TLS=tcp timeout -k 10 "$limit" srun --mpi=pmi2 -N 2 -n 2 --ntasks-per-node=1 --kill-on-bad-exit=1 \
      --job-name=ptrain-test "$HERE/task_wrapper.sh" "$@" >"$out" 2>&1
    rc=$?
    read -ra after <<<"$(sent_by_host)"
    ;;
  sbatch)
    # The job runs as root on this machine, in this directory; mpiexec (hydra) finds the
    # allocation through Slurm's environment. Its own timeout ends a hang inside the job.
    {
      echo "#!/bin/bash"
      echo "echo \"job \$SLURM_JOB_ID on \$SLURM_JOB_NODELIST, \$SLURM_NTASKS tasks\""
      printf 'exec timeout -k 10 %q mpiexec -n "$SLURM_NTASKS"' "$limit"
      printf ' %q' "$HERE/task_wrapper.sh" "$@"
      echo
    } >"$work/job.sh"
    timeout -k 10 $((limit + 30)) sbatch --wait --parsable -N 1 -n 2 --job-name=ptrain-test \
      --chdir="$PWD" --output="$work/job.out" "$work/job.sh" >"$work/sbatch.out" 2>&1
    rc=$?
    job=$(head -n 1 "$work/sbatch.out" | grep -oE '^[0-9]+' || true)
    [ $rc -ge 124 ] && [ -n "$job" ] && scancel "$job" 2>/dev/null
    { echo "-- sbatch: exit $rc"; cat "$work/sbatch.out"; echo "-- job output ($work/job.out)"; cat "$work/job.out" 2>/dev/null; } >"$out"
    [ -s "$work/job.out" ] || { echo "the job wrote no output file" >>"$out"; [ $rc -eq 0 ] && rc=1; }
    ;;
esac
elapsed=$((SECONDS - start))
cat "$out"

problems=()
case $rc in
  0) [ $expect_failure = 1 ] && problems+=("the launch exited 0; expected a failure") ;;
  124 | 137) problems+=("the launch did not end within $limit s: killed") ;;
  *) [ $expect_failure = 1 ] || problems+=("the launch exited with status $rc") ;;
esac
for regex in "${expects[@]}"; do
  grep -qE -- "$regex" "$out" || problems+=("no output line matches '$regex'")
done
tasks=$(grep -c '^slurm-task: ' "$out" || true)
[ "$tasks" = 2 ] || problems+=("$tasks 'slurm-task:' lines where 2 ranks were launched")
if [ "$mode" = two_hosts ]; then
  hosts=$(sed -n 's/^slurm-task: .* host=\([^ ]*\) .*/\1/p' "$out" | sort -u | wc -l)
  ips=$(sed -n 's/^slurm-task: .* ip=\([^ ]*\)$/\1/p' "$out" | grep -v '^none$' | sort -u | wc -l)
  [ "$hosts" = 2 ] && [ "$ips" = 2 ] || problems+=("the 2 ranks ran on $hosts distinct host name(s) with $ips distinct IP(s), expected 2 and 2")
  if [ ${#before[@]} = 2 ] && [ ${#after[@]} = 2 ]; then
    sent0=$((after[0] - before[0])) sent1=$((after[1] - before[1]))
    echo "bytes sent through the virtual network during the run: node0 $sent0, node1 $sent1"
    [ "$sent0" -ge "$min_bytes" ] && [ "$sent1" -ge "$min_bytes" ] \
      || problems+=("a node sent fewer than $min_bytes bytes through the virtual network: MPI did not cross it")
  else
    problems+=("could not read the byte counters of vh0/vh1")
  fi
fi

if [ ${#problems[@]} -ne 0 ]; then
  printf 'FAILED: %s\n' "${problems[@]}"
  dump_logs "$R" 2>&1
  exit 1
fi
echo "PASSED: $mode run of $(basename "$1") in ${elapsed}s"
