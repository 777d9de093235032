#!/usr/bin/env bash
# slurm_preemption.sh DRILL MPIEXEC: preemption as Slurm does it, on the one-node testbed. A
# requeueable batch job of 2 tasks runs mpi_preemption_drill (test/mpi/preemption_drill.cpp)
# through srun --mpi=pmi2, resuming when a checkpoint exists. Once its first checkpoint is
# written, `scancel --signal=USR1` signals the job's tasks: every rank must save and exit 0, rank 0
# must requeue the job (`scontrol requeue`), and the job's second run must resume and end with
# the loss and weights of an uninterrupted run (mpiexec -n 2 here), bit for bit. Exit 77 (skipped)
# when not root, like every slurm/ entry.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/harness.sh"
need_root
drill=$1 mpiexec=$2
testbed_start single || { echo "FAILED: the Slurm testbed 'single' did not start"; exit 1; }
work=$(mktemp -d /tmp/ptrain-slurm-preemption.XXXXXX)
job=""
trap '[ -n "$job" ] && scancel "$job" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; echo "-- job output"; cat "$work/job.out" 2>/dev/null; scontrol show job "$job" 2>/dev/null; exit 1; }
checkpointed() { ls "$work"/run/checkpoints/step-*/manifest.txt >/dev/null 2>&1; }

cat >"$work/job.sh" <<EOF
#!/bin/bash
echo "job \$SLURM_JOB_ID, restart \${SLURM_RESTART_COUNT:-0}"
resume=""
ls $work/run/checkpoints/step-*/manifest.txt >/dev/null 2>&1 && resume=resume
exec timeout -k 10 120 srun --mpi=pmi2 -n 2 --kill-on-bad-exit=1 $drill $work/run 300 \$resume
EOF
job=$(sbatch --parsable --requeue --open-mode=append -N 1 -n 2 --job-name=ptrain-preemption --chdir="$work" \
  --output="$work/job.out" "$work/job.sh") || fail "sbatch failed: $job"
for _ in $(seq 1 1200); do checkpointed && break; sleep 0.05; done
checkpointed || fail "the job wrote no checkpoint"
scancel --signal=USR1 "$job" || fail "scancel --signal=USR1 $job failed"
state=""
for _ in $(seq 1 300); do
  state=$(scontrol show job "$job" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2)
  restarts=$(scontrol show job "$job" 2>/dev/null | grep -oE 'Restarts=[0-9]+' | cut -d= -f2)
  case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL) break ;; esac
  # slurmctld holds a requeued job back for a while (its BeginTime lies ahead); the test has
  # seen the requeue, so release it as an administrator would rather than wait two minutes.
  if [ "$state" = PENDING ] && [ "${restarts:-0}" -ge 1 ] && [ -z "${released:-}" ]; then
    scontrol update JobId="$job" StartTime=now && released=1
  fi
  sleep 1
done
cat "$work/job.out"
[ "$state" = COMPLETED ] || fail "the job ended $state, expected COMPLETED after its requeue"
[ "${restarts:-0}" -ge 1 ] || fail "the job was not requeued (Restarts=${restarts:-0})"
grep -q "^preemption_drill: preempted at step" "$work/job.out" || fail "the first run did not stop for the signal"
grep -q "Trainer: requeuing Slurm job $job" "$work/job.out" || fail "rank 0 did not requeue the job"
job=""
timeout 120 "$mpiexec" -n 2 "$drill" "$work/whole" 300 >"$work/whole.out" 2>&1 || { cat "$work/whole.out"; fail "the uninterrupted run failed"; }
resumed=$(grep "^preemption_drill: finished" "$work/job.out" | tail -n 1)
whole=$(grep "^preemption_drill: finished" "$work/whole.out")
echo "resumed: $resumed"
echo "whole:   $whole"
[ -n "$whole" ] && [ "$resumed" = "$whole" ] || fail "the requeued run does not end where the uninterrupted one does"
echo "slurm_preemption: passed"
