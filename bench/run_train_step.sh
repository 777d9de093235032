#!/bin/sh
# Runs bench/train_step against both PyTorch peers in the same run: pip's torch in a venv
# (bench/torch_venv.sh finds or makes it) and Debian's python3-torch under /usr/bin/python3.
# Usage: bench/run_train_step.sh [BUILD_DIR [THREADS [MODELS [fp32|bf16 [RUNS]]]]] (default: build 2,
# all, fp32, 1 run; MODELS: all, or bench_train_step's comma-separated names; bf16:
# MixedPrecision<Bf16> against torch.autocast on CPUs with AVX512_BF16). With RUNS > 1 the whole bench runs RUNS times, one after the other, and then each
# model's medians over the runs follow, per implementation and per ratio:
#   bench=train_step_median model=... precision=... impl=... runs=... images_per_sec=... peak_mb=...
#   bench=train_step_median model=... precision=... runs=... ratio_ptrain_over_pytorch_pip=...
# bench/transformer_lm takes the same peers: PTRAIN_TORCH_PYTHONS=... build/bench/bench_transformer_lm.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bin="$build/bench/bench_train_step"
[ -x "$bin" ] || { echo "run_train_step.sh: no $bin (build the bench_train_step target)" >&2; exit 1; }
peers=/usr/bin/python3
if pip_python=$(sh "$here/torch_venv.sh"); then
  peers="$pip_python:$peers"
else
  echo 'bench=train_step peer=pytorch_pip status=unavailable reason="bench/torch_venv.sh found no venv with torch and could not make one"'
fi
models=${3:-all} precision=${4:-fp32} runs=${5:-1}
[ "$models" = all ] && models=small_cnn,resnet18_cifar,resnet50_cifar,vgg16_128,unet_128
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run=1
while [ "$run" -le "$runs" ]; do
  echo "bench=load run=$run uptime=\"$(uptime)\""
  PTRAIN_TORCH_PYTHONS=$peers "$bin" "${2:-2}" "$models" "$precision" | tee -a "$log"
  run=$((run + 1))
done
echo "bench=load uptime=\"$(uptime)\""
[ "$runs" -gt 1 ] || exit 0
# Per model and implementation (or ratio), the median of each figure over the runs.
awk -v precision="$precision" -v runs="$runs" '
  $1 != "bench=train_step" { next }
  {
    model = ""; impl = ""; n = 0
    for (i = 2; i <= NF; ++i) {
      split($i, kv, "=")
      if (kv[1] == "model") model = kv[2]
      else if (kv[1] == "impl") impl = kv[2]
      else if (kv[1] == "images_per_sec" || kv[1] == "peak_mb" || kv[1] ~ /^ratio_/) { name[++n] = kv[1]; value[n] = kv[2] }
    }
    for (i = 1; i <= n; ++i) {
      group = model SUBSEP (name[i] ~ /^ratio_/ ? "" : impl)
      if (!(group in figures)) figures[group] = ""
      if (!((group, name[i]) in values)) figures[group] = figures[group] " " name[i]
      values[group, name[i]] = values[group, name[i]] " " value[i]
    }
  }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    for (group in figures) {
      split(group, g, SUBSEP)
      line = "bench=train_step_median model=" g[1] " precision=" precision (g[2] == "" ? "" : " impl=" g[2]) " runs=" runs
      n = split(figures[group], names, " ")
      for (i = 1; i <= n; ++i) line = line " " names[i] "=" median(values[group, names[i]])
      print line
    }
  }' "$log" | sort
