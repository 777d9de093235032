#!/bin/sh
# Runs DataParallel's benchmarks, then PyTorch's DDP over gloo on the same work with each PyTorch
# peer, one after the other: pip's torch in a venv (bench/torch_venv.sh finds or makes it) and
# Debian's python3-torch under /usr/bin/python3. Prints each peer's version, its DDP efficiency and
# the ratios of images/s. Usage: bench/run_data_parallel.sh [BUILD_DIR] (BUILD_DIR holds
# bench/bench_data_parallel; default: build). PTRAIN_BENCH_STEPS and PTRAIN_BENCH_REPEATS pass
# through to both.
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

peers=""
if pip_python=$(sh "$here/torch_venv.sh"); then
  peers="pytorch_pip=$pip_python"
else
  echo 'bench=weak_scaling impl=pytorch_pip status=unavailable reason="bench/torch_venv.sh found no venv with torch and could not make one"'
fi
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  peers="$peers pytorch_debian=/usr/bin/python3"
else
  echo 'bench=weak_scaling impl=pytorch_debian status=unavailable reason="/usr/bin/python3 cannot import torch"'
fi
failed=0
for peer in $peers; do
  name=${peer%%=*}
  # 1 thread per process; the peer picks a free loopback port.
  PYTHONWARNINGS=ignore::UserWarning timeout 900 "${peer#*=}" "$here/torch_ddp_peer.py" --name "$name" --batch 64 --warmup 1 --steps "$steps" --world 2 >>"$out" \
    || { echo "bench=weak_scaling impl=${name}_ddp_gloo status=failed reason=\"bench/torch_ddp_peer.py failed or timed out\""; failed=1; }
done
echo "bench=load uptime=\"$(uptime)\""

awk '
  function field(line, key,   at) { at = index(line, key); return at ? substr(line, at + length(key)) + 0 : 0 }
  function quoted(line, key,   rest) { rest = substr(line, index(line, key) + length(key)); return substr(rest, 1, index(rest, "\"") - 1) }
  /^bench=weak_scaling impl=ptrain ranks=1 / { ours1 = field($0, "images_per_sec=") }
  /^bench=weak_scaling impl=ptrain_data_parallel_fp32 / { ours2 = field($0, "images_per_sec=") }
  /^\{"impl": / {
    impl = quoted($0, "\"impl\": \"")
    name = impl; sub(/_ddp_gloo$/, "", name)
    if (!(name in version)) order[++peers] = name
    version[name] = quoted($0, "\"torch\": \"")
    if (impl ~ /_ddp_gloo$/) two[name] = field($0, "\"images_per_sec\": "); else one[name] = field($0, "\"images_per_sec\": ")
  }
  END {
    for (p = 1; p <= peers; ++p) {
      n = order[p]
      printf "bench=weak_scaling impl=%s torch=%s ranks=1 threads=1 batch_per_rank=64 images_per_sec=%.2f\n", n, version[n], one[n]
      printf "bench=weak_scaling impl=%s_ddp_gloo torch=%s ranks=2 threads=1 batch_per_rank=64 images_per_sec=%.2f efficiency=%.3f\n", n, version[n], two[n], (one[n] > 0 ? two[n] / (2 * one[n]) : 0)
      if (two[n] > 0 && ours2 > 0) printf "bench=weak_scaling ratio_ptrain_dp_over_%s_ddp=%.3f\n", n, ours2 / two[n]
      if (one[n] > 0 && ours1 > 0) printf "bench=weak_scaling ratio_ptrain_1rank_over_%s_1rank=%.3f\n", n, ours1 / one[n]
    }
  }' "$out"
exit "$failed"
