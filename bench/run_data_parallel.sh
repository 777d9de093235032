#!/bin/sh
# Runs DataParallel's benchmarks and PyTorch's DDP over gloo on the same work, one after the
# other, and prints the ratio of images/s. Usage: bench/run_data_parallel.sh [BUILD_DIR]
# (BUILD_DIR holds bench/bench_data_parallel; default: build). PTRAIN_BENCH_STEPS and
# PTRAIN_BENCH_REPEATS pass through to both.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bin="$build/bench/bench_data_parallel"
[ -x "$bin" ] || { echo "run_data_parallel.sh: no $bin (build the bench_data_parallel target)" >&2; exit 1; }
steps=${PTRAIN_BENCH_STEPS:-4}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "bench=load uptime=\"$(uptime)\""
mpiexec -n 1 "$bin" | tee "$out"
mpiexec -n 2 "$bin" | tee -a "$out"

if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  echo 'bench=weak_scaling impl=pytorch_ddp_gloo status=skipped reason="/usr/bin/python3 cannot import torch"'
  exit 0
fi
# 1 thread per process; the peer picks a free loopback port.
timeout 900 /usr/bin/python3 "$here/torch_ddp_peer.py" --batch 64 --warmup 1 --steps "$steps" --world 2 >>"$out" \
  || { echo 'bench=weak_scaling impl=pytorch_ddp_gloo status=failed reason="bench/torch_ddp_peer.py failed or timed out"'; exit 1; }
echo "bench=load uptime=\"$(uptime)\""

awk '
  function field(line, key,   at) { at = index(line, key); return at ? substr(line, at + length(key)) + 0 : 0 }
  /^bench=weak_scaling impl=ptrain ranks=1 / { ours1 = field($0, "images_per_sec=") }
  /^bench=weak_scaling impl=ptrain_data_parallel_fp32 / { ours2 = field($0, "images_per_sec=") }
  /"impl": "pytorch",/ { torch1 = field($0, "\"images_per_sec\": ") }
  /"impl": "pytorch_ddp_gloo"/ { torch2 = field($0, "\"images_per_sec\": ") }
  END {
    printf "bench=weak_scaling impl=pytorch ranks=1 threads=1 batch_per_rank=64 images_per_sec=%.2f\n", torch1
    printf "bench=weak_scaling impl=pytorch_ddp_gloo ranks=2 threads=1 batch_per_rank=64 images_per_sec=%.2f efficiency=%.3f\n", torch2, (torch1 > 0 ? torch2 / (2 * torch1) : 0)
    if (torch2 > 0 && ours2 > 0) printf "bench=weak_scaling ratio_ptrain_dp_over_pytorch_ddp=%.3f\n", ours2 / torch2
    if (torch1 > 0 && ours1 > 0) printf "bench=weak_scaling ratio_ptrain_1rank_over_pytorch_1rank=%.3f\n", ours1 / torch1
  }' "$out"
