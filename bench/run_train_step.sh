#!/bin/sh
# Runs bench/train_step against both PyTorch peers in the same run: pip's torch in a venv
# (bench/torch_venv.sh finds or makes it) and Debian's python3-torch under /usr/bin/python3.
# Usage: bench/run_train_step.sh [BUILD_DIR [THREADS [MODELS [fp32|bf16]]]] (default: build 2, every
# model, fp32; bf16: MixedPrecision<Bf16> against torch.autocast on CPUs with AVX512_BF16).
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
echo "bench=load uptime=\"$(uptime)\""
PTRAIN_TORCH_PYTHONS=$peers "$bin" "${2:-2}" "${3:-small_cnn,resnet18_cifar,resnet50_cifar,vgg16_128,unet_128}" "${4:-fp32}"
echo "bench=load uptime=\"$(uptime)\""
