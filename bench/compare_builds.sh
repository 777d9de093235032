#!/usr/bin/env bash
# Compares two builds of bench_train_step on the same machine in the same run: the binaries run
# in turn, ROUNDS times each (BEFORE, AFTER, BEFORE, ...), so machine noise falls on both alike.
# Prints, per model, the median images/s of each build over the rounds and their ratio:
#   bench=train_step_compare model=... before_images_per_sec=... after_images_per_sec=... ratio_after_over_before=...
# Usage: bench/compare_builds.sh BEFORE/bench_train_step AFTER/bench_train_step [ROUNDS=5] [THREADS=2] [MODELS]
# (MODELS: bench_train_step's comma-separated list; all of them when left out)
set -euo pipefail
before=$1 after=$2 rounds=${3:-5} threads=${4:-2} models=${5:-}
for binary in "$before" "$after"; do
  [ -x "$binary" ] || { echo "compare_builds.sh: $binary is not an executable bench_train_step" >&2; exit 2; }
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for build in before after; do
    binary=$before
    [ "$build" = after ] && binary=$after
    "$binary" "$threads" $models | sed -n "s/^bench=train_step model=\([^ ]*\) impl=ptrain .* images_per_sec=\([0-9.]*\).*/$build \1 \2/p" >>"$log"
  done
done
awk '
  { value[$1 " " $2] = value[$1 " " $2] " " $3; models[$2] = 1 }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    for (m in models) {
      b = median(value["before " m]); a = median(value["after " m])
      printf "bench=train_step_compare model=%s before_images_per_sec=%.2f after_images_per_sec=%.2f ratio_after_over_before=%.3f\n", m, b, a, a / b
    }
  }' "$log" | sort
