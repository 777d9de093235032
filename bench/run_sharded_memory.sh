#!/bin/sh
# Runs bench_sharded_memory under mpiexec -n 1, 2, 4, 8 and 16: per rank, the live bytes of
# parameters, gradients and optimizer state at the peak of a step for DataParallel and
# Sharded<Zero1|2|3>, against ZeRO's formulas, and samples/s against DataParallel's in the same
# run; then one line saying whether every total is within 10% of its formula. Usage:
# bench/run_sharded_memory.sh [BUILD_DIR] (BUILD_DIR holds bench/bench_sharded_memory; default:
# build). PTRAIN_BENCH_STEPS passes through (at 8 and 16 ranks, oversubscribed, 0: memory only);
# PTRAIN_NUM_THREADS (default 1: one thread per rank, as at N = 4 on two cores) too.
set -eu
build=${1:-build}
bin="$build/bench/bench_sharded_memory"
[ -x "$bin" ] || { echo "run_sharded_memory.sh: no $bin (build the bench_sharded_memory target)" >&2; exit 1; }
export PTRAIN_NUM_THREADS="${PTRAIN_NUM_THREADS:-1}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "bench=load uptime=\"$(uptime)\""
for n in 1 2 4 8 16; do
  if [ "$n" -ge 8 ]; then
    PTRAIN_BENCH_STEPS=0 mpiexec -n "$n" "$bin" | tee -a "$out"
  else
    mpiexec -n "$n" "$bin" | tee -a "$out"
  fi
done
echo "bench=load uptime=\"$(uptime)\""

awk '
  /^bench=sharded_memory / { lines++; if ($0 ~ / within_10pct=no /) { bad++; print "off: " $0 } }
  END {
    printf "bench=sharded_memory_check lines=%d within_10pct=%d off=%d\n", lines, lines - bad, bad
    exit (lines == 124 && bad == 0) ? 0 : 1
  }' "$out"
