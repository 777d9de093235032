#!/bin/bash
# ptrain_run_test.sh PTRAIN_RUN CASE [STALL_PROGRAM]: ptrain_run's contract, one CASE per ctest
# entry, over fake_rank.sh (a stand-in program) under mpiexec:
#   refusals          bad arguments exit 2 with a sentence naming the flag and its values, starting nothing
#   no_endless_restarts  a program that fails before its first checkpoint is restarted once, not again
#   restarts          a run that saves checkpoints is restarted with --resume (once in ARGS) until it
#                     finishes; out of restarts, the exit code is the run's
#   ends_failed_runs  a killed rank is named with its signal, a rank's exit code with its rank, and
#                     every rank is ended, by mpiexec or by ptrain_run
#   stall             (STALL_PROGRAM: test/mpi's collective_stall) a stopped rank, ended by the
#                     watchdog, is named, and the stopped process does not outlive the run
#   shrinks           --min-nproc: a restart that fails again without a new checkpoint continues on
#                     fewer ranks, not below --min-nproc
#   srun              inside a Slurm allocation (SLURM_JOB_ID) the ranks start through srun
set -u
run=$1 case=$2 stall=${3:-}
fake=$(dirname "$0")/fake_rank.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "ptrain_run_test ($case): $*" >&2; exit 1; }
# expect CODE REGEX ARGS...: ptrain_run ARGS exits CODE and its output matches REGEX (grep -E, with
# .* across lines).
expect() {
  local code=$1 regex=$2
  shift 2
  out=$("$run" "$@" 2>&1)
  local got=$?
  echo "\$ ptrain_run $*"
  echo "$out"
  [ "$got" = "$code" ] || fail "ptrain_run $* exited $got, expected $code"
  echo "$out" | grep -zqE -- "$regex" || fail "ptrain_run $*: the output lacks '$regex'"
}
# left PATTERN: fails if a process of this test (PTRAIN_RUN_TEST in its environment) matches PATTERN.
export PTRAIN_RUN_TEST=$work
left() {
  local p
  for p in $(pgrep -f "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PTRAIN_RUN_TEST=$work" &&
      fail "a process of $1 outlived the run: $(ps -o pid,stat,args -p "$p")"
  done
  return 0
}
log=$work/log
ck=$work/ck

case $case in
  refusals)
    expect 2 "--nproc '0': expected a number of ranks from 1 to 65536" --nproc 0 -- true
    expect 2 "--nproc 'two': expected a number of ranks from 1 to 65536" --nproc two -- true
    expect 2 "--nproc N is required" -- true
    expect 2 "--min-nproc 3 is above --nproc 2: expected the fewest ranks a restart may continue on, from 1 to 2" \
      --nproc 2 --min-nproc 3 -- true
    expect 2 "--min-nproc '0': expected a number of ranks from 1 to --nproc" --nproc 2 --min-nproc 0 -- true
    expect 2 "no program to run: expected .ptrain_run --nproc N \[...\] -- PROGRAM ARGS" --nproc 2
    expect 2 "no program to run" --nproc 2 --
    expect 2 "unknown flag '--restarts': expected --nproc, --max-restarts, --min-nproc, --checkpoint-dir, --launcher or --help" \
      --nproc 2 --restarts 3 -- true
    expect 2 "--max-restarts '-1': expected a number of restarts from 0 to 1000" --nproc 2 --max-restarts -1 -- true
    expect 2 "--max-restarts 2 needs the directory PROGRAM saves its checkpoints in" --nproc 2 --max-restarts 2 -- true
    expect 2 "--launcher 'ssh': expected auto, mpiexec or srun" --nproc 2 --launcher ssh -- true
    expect 2 "--nproc needs a value" --nproc
    [ -z "$(echo "$out" | grep attempt)" ] || fail "a refused command started a run"
    expect 0 "--min-nproc M .*the fewest ranks a restart may continue on" --help
    expect 0 "the run finished \(exit code 0\) after 0 restart" --nproc=2 true
    ;;
  no_endless_restarts)
    expect 4 "the restarted run failed again before its first checkpoint: not restarting it" \
      --nproc 2 --max-restarts 5 -- sh "$fake" "$log" fail 4 --checkpoint-dir "$ck"
    [ "$(grep -c . "$log")" = 4 ] || fail "expected 2 attempts of 2 ranks, the log says: $(cat "$log")"
    [ "$(grep -c -- "--resume" "$log")" = 2 ] || fail "expected the restart alone with --resume: $(cat "$log")"
    ;;
  restarts)
    expect 0 "restart 2 of 5 on 2 rank\(s\), resuming from $ck/step-2.*the run finished \(exit code 0\) after 2 restart" \
      --nproc 2 --max-restarts 5 -- sh "$fake" "$log" progress 3 --checkpoint-dir "$ck"
    [ "$(grep -c "^rank 0 of 2" "$log")" = 3 ] || fail "expected 3 attempts: $(cat "$log")"
    [ "$(grep -c -- "--checkpoint-dir $ck --resume$" "$log")" = 4 ] || fail "expected ARGS --resume in the restarts: $(cat "$log")"
    rm -rf "$log" "$ck"
    # ARGS holding --resume already keep one, and the directory may come from ptrain_run.
    FAKE_CHECKPOINT_DIR=$ck expect 0 "after 1 restart" --nproc 2 --max-restarts 5 --checkpoint-dir "$ck" -- sh "$fake" "$log" progress 2 --resume
    [ "$(grep -c -- "--resume$" "$log")" = 4 ] && ! grep -q -- "--resume --resume" "$log" ||
      fail "expected --resume once in every attempt: $(cat "$log")"
    rm -rf "$log" "$ck"
    expect 3 "no restarts left \(--max-restarts 1\); the run failed \(exit code 3\) after 1 restart" \
      --nproc 2 --max-restarts 1 -- sh "$fake" "$log" progress 3 --checkpoint-dir="$ck"
    ;;
  ends_failed_runs)
    expect 9 "attempt 1 on 3 rank\(s\) failed after .*: rank 2 \(pid [0-9]+ on host [^)]+\) was killed by signal 9 \(SIGKILL\)" \
      --nproc 3 -- sh "$fake" "$log" kill 2
    left "$fake"
    start=$(date +%s)
    expect 5 "ending them.*failed after [0-9.]+ s \(exit code 5\): rank 2 \(on host [^)]+\) exited with code 5" \
      --nproc 3 -- sh "$fake" "$log" exit_one 5
    [ $(($(date +%s) - start)) -lt 20 ] || fail "ending the ranks took $(($(date +%s) - start)) s"
    left "$fake"
    ;;
  stall)
    [ -x "$stall" ] || fail "no stall program '$stall'"
    PTRAIN_COLLECTIVE_TIMEOUT=3 expect 1 \
      "failed after .*: the stall watchdog \(PTRAIN_COLLECTIVE_TIMEOUT\) ended the run: rank\(s\) 1 had not joined collective #4 allreduce_sum of 1000 float" \
      --nproc 2 -- "$stall" stop 1
    left "$stall stop"
    ;;
  shrinks)
    expect 0 "continuing on 2 \(--min-nproc 1\).*continuing on 1 \(--min-nproc 1\).*the run finished \(exit code 0\) after 3 restart" \
      --nproc 3 --min-nproc 1 --max-restarts 5 -- sh "$fake" "$log" lost_host --checkpoint-dir "$ck"
    [ "$(grep -c "^rank 0 of 1: --checkpoint-dir $ck --resume$" "$log")" = 1 ] || fail "no attempt on 1 rank: $(cat "$log")"
    rm -rf "$log" "$ck"
    expect 3 "continuing on 2 \(--min-nproc 2\).*failed again before saving a checkpoint newer than $ck/step-1: not restarting it \(already at --min-nproc 2\)" \
      --nproc 3 --min-nproc 2 --max-restarts 5 -- sh "$fake" "$log" lost_host --checkpoint-dir "$ck"
    ;;
  srun)
    # A stand-in srun that logs its arguments and starts the tasks through mpiexec.
    mkdir "$work/bin"
    cat >"$work/bin/srun" <<'SRUN'
#!/bin/sh
echo "srun $*" >>"$SRUN_LOG"
n=1
while [ $# -gt 0 ]; do
  case $1 in --ntasks=*) n=${1#--ntasks=} ;; --mpi=* | --kill-on-bad-exit=*) ;; *) break ;; esac
  shift
done
exec mpiexec -n "$n" "$@"
SRUN
    chmod +x "$work/bin/srun"
    SRUN_LOG=$work/srun.log SLURM_JOB_ID=1 PATH=$work/bin:$PATH expect 0 "attempt 1 on 2 rank\(s\) through srun" \
      --nproc 2 -- sh "$fake" "$log" progress 1 --checkpoint-dir "$ck"
    grep -q "^srun --mpi=pmi2 --ntasks=2 --kill-on-bad-exit=1 .*/ptrain_run --rank-guard -- sh " "$work/srun.log" ||
      fail "srun was not asked for 2 tasks under the guard: $(cat "$work/srun.log")"
    ;;
  *) fail "unknown case" ;;
esac
echo "ptrain_run_test ($case): passed"
