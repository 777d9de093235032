#!/bin/bash
# preemption_drill.sh MPIEXEC NP_FLAG NP PROGRAM DIR: SIGTERM to one rank of a data-parallel run
# under mpiexec (Slurm's preemption, done by hand). Every rank must finish its step, save a
# checkpoint and exit 0; resumed, the run must end with the uninterrupted run's loss and weights,
# bit for bit.
set -u
mpiexec=$1 np_flag=$2 np=$3 program=$4 dir=$5
epochs=300
fail() { echo "preemption_drill: $*" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
timeout 120 "$mpiexec" "$np_flag" "$np" "$program" "$dir/run" "$epochs" >"$dir/stopped.log" 2>&1 &
launch=$!
for _ in $(seq 1 600); do
  ls "$dir"/run/checkpoints/step-*/manifest.txt >/dev/null 2>&1 && break
  sleep 0.05
done
ls "$dir"/run/checkpoints/step-*/manifest.txt >/dev/null 2>&1 || fail "no checkpoint appeared"
victim=$((np - 1))
kill -TERM "$(cat "$dir/run/pid-$victim")" || fail "cannot signal rank $victim"
wait "$launch"
code=$?
cat "$dir/stopped.log"
[ "$code" -eq 0 ] || fail "the signalled run exited $code, expected 0 on every rank"
grep -q "^preemption_drill: preempted at step" "$dir/stopped.log" || fail "the run did not stop for the signal"
grep -q "Trainer: preempted (a signal on another rank): saved" "$dir/stopped.log" ||
  fail "rank 0 did not say that another rank's signal stopped the run"

timeout 120 "$mpiexec" "$np_flag" "$np" "$program" "$dir/run" "$epochs" resume >"$dir/resumed.log" 2>&1 ||
  { cat "$dir/resumed.log"; fail "the resumed run failed"; }
timeout 120 "$mpiexec" "$np_flag" "$np" "$program" "$dir/whole" "$epochs" >"$dir/whole.log" 2>&1 ||
  { cat "$dir/whole.log"; fail "the uninterrupted run failed"; }
resumed=$(grep "^preemption_drill: finished" "$dir/resumed.log")
whole=$(grep "^preemption_drill: finished" "$dir/whole.log")
echo "resumed: $resumed"
echo "whole:   $whole"
[ -n "$whole" ] && [ "$resumed" = "$whole" ] || fail "the resumed run does not end where the uninterrupted one does"
rm -rf "$dir"
echo "preemption_drill: passed"
