#!/usr/bin/env bash
# ctest gpu/check_simulated_gpu: the paths of scripts/gpu_bundle.sh and scripts/gpu_check.sh that
# only a GPU machine reaches, run here on stand-ins, so that their first real run is not their
# first run. A fake build folder whose programs are shell scripts printing what the real ones print
# (the epoch lines, the bench's line, overflow lines and a TensorBoard file of loss scales, NCCL's
# one-GPU-per-rank refusal under two ranks) is collected by gpu_bundle.sh; gpu_check.sh then runs
# on it with a fake nvidia-smi and a python3 that answers for bench/torch_cuda_peer.py. Checked:
# every step's status and figures in the result file, the exit status, and, in a second run with a
# program that hangs and a short --budget, that the step is cut off at its phase's end and the
# steps left are skipped for the budget, not run.
#   simulated_gpu.sh WORK_DIR
set -u
# shellcheck disable=SC2016  # the stand-ins' bodies expand when they run
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$1
rm -rf "$work" && mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd)
failures=0
expect() {  # expect EXIT-STATUS-OF-A-CHECK WHAT
  if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; failures=$((failures + 1)); fi
}
field() { python3 "$root/scripts/gpu_result.py" get "$1" "$2" "$3"; }

fake=$work/build
mkdir -p "$fake/test/cuda" "$fake/examples" "$fake/bench" "$work/path"
# A stand-in program: FAKE_GPU=1 says a GPU is there.
stand_in() {
  local path=$1 body=$2
  printf '#!/usr/bin/env bash\n%s\n' "$body" >"$path"
  chmod +x "$path"
}
stand_in "$fake/test/cuda/cuda_device_check" '
if [ "${FAKE_GPU:-0}" != 1 ]; then echo "no CUDA device found (stand-in)" >&2; exit 2; fi
echo "1 CUDA device(s); device 0: NVIDIA H200, compute capability 9.0"; echo "all CUDA device checks passed"'
stand_in "$fake/test/cuda/cuda_header_checks" 'exit 0'
example_body='
[ "${1:-}" = --help ] && { echo "usage: stand-in"; exit 0; }
[ "${FAKE_GPU:-0}" = 1 ] || { echo "no CUDA device found (stand-in)" >&2; exit 2; }
case "$0" in *"/${FAKE_HANG:-none}_cuda") sleep 1000 ;; esac
if [ -n "${PMI_RANK:-}" ]; then
  echo "rank ${PMI_RANK}: NCCL needs one GPU per rank: 2 ranks run on this node but it has 1 CUDA device" >&2
  exit 1
fi
tensorboard=""
while [ $# -gt 0 ]; do [ "$1" = --tensorboard ] && tensorboard=$2; shift; done
if [ -n "$tensorboard" ]; then
  for s in 8388608.0 4194304.0 131072.0 65536.0; do echo "Gradient overflow. Skipping step, loss scale reduced to $s"; done
  mkdir -p "$tensorboard"
  python3 "$FAKE_TB_WRITER" "$tensorboard/events.out.tfevents.1.stand-in" 16777216 8388608 4194304 131072 65536 65536 131072
fi
echo "epoch 1/1 loss 0.6931 accuracy 0.7500 val_loss 0.5000 val_accuracy 0.8000 1234.5 img/s 0.4s lr 0.001"'
for name in fashion_mnist resnet_cifar10 imagenet_resnet transformer_lm; do
  stand_in "$fake/examples/${name}_cuda" "$example_body"
done
stand_in "$fake/bench/bench_cuda_throughput" '
[ "${FAKE_GPU:-0}" = 1 ] || { echo "bench_cuda_throughput: no CUDA device found (stand-in)" >&2; exit 2; }
[ $# -ge 2 ] || { echo "usage: bench_cuda_throughput MODEL PRECISION" >&2; exit 64; }
echo "bench=cuda_throughput model=$1 precision=$2 impl=ptrain gpu=NVIDIA_H200 batch=${3:-128} steps=10 skipped_steps=0 first_step_s=1.000 median_ms=100.00 images_per_sec=1280.0 peak_in_use_mib=20000 device_used_mib=21000"'
stand_in "$fake/examples/make_example_data" '
for d in fashion_mnist cifar10 imagenet/train/a imagenet/val/a; do mkdir -p "$1/$d" && echo data >"$1/$d/file"; done'
stand_in "$fake/examples/make_wikitext_data" 'mkdir -p "$1" && echo tokens >"$1/wiki.train.tokens"'
# A TensorBoard file of step/loss_scale scalars, framed as io/tensorboard.hpp writes it.
cat >"$work/tb_writer.py" <<'EOF'
import struct, sys
def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
def field(n, wire, payload):
    return varint(n << 3 | wire) + (varint(len(payload)) + payload if wire == 2 else payload)
with open(sys.argv[1], "wb") as f:
    for step, scale in enumerate(float(s) for s in sys.argv[2:]):
        value = field(1, 2, b"step/loss_scale") + field(2, 5, struct.pack("<f", scale))
        event = field(1, 1, struct.pack("<d", 1.7e9)) + field(2, 0, varint(step)) + field(5, 2, field(1, 2, value))
        f.write(struct.pack("<Q", len(event)) + b"\0" * 4 + event + b"\0" * 4)
EOF
export FAKE_TB_WRITER=$work/tb_writer.py

# The bundle of the stand-ins: complete, every program required.
bash "$root/scripts/gpu_bundle.sh" --collect-from "$fake" "$work/bundle" --fast >"$work/collect.log" 2>&1
rc=$?
cat "$work/collect.log"
expect "$rc" "gpu_bundle.sh --collect-from: the stand-ins' bundle is complete"
grep -q "^# missing: none" "$work/bundle/MANIFEST.txt"
expect $? "the manifest lists no program missing"

# The GPU machine: nvidia-smi answers, the programs see a GPU, python3 answers for PyTorch.
stand_in "$work/path/nvidia-smi" '
case "$*" in
  *--query-gpu*) echo "0, NVIDIA H200, 143771, 580.159.04" ;;
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-stand-in)" ;;
  *) echo "| NVIDIA-SMI 580.159.04  stand-in |" ;;
esac'
stand_in "$work/path/python-with-torch" '
case "${1:-}" in
  */torch_cuda_peer.py)
    model=${2%%:*} precision=${2##*:}
    echo "bench=cuda_throughput model=$model precision=$precision impl=pytorch torch=2.11.0 cudnn=91300 channels_last=1 cudnn_benchmark=1 tf32=0 gpu=NVIDIA_H200 batch=${3:-128} steps=10 first_step_s=2.000 median_ms=50.00 images_per_sec=2560.0 peak_allocated_mib=15000 peak_reserved_mib=16000 device_used_mib=16500" ;;
  *) exec python3 "$@" ;;
esac'
export FAKE_GPU=1 PTRAIN_GPU_CHECK_PYTHON=$work/path/python-with-torch PTRAIN_GPU_CHECK_WORK=$work/unpacked
PATH=$work/path:$PATH bash "$root/scripts/gpu_check.sh" "$work/out" --bundle "$work/bundle" >"$work/run.log" 2>&1
rc=$?
cat "$work/run.log"
result=$work/out/gpu_check_result.txt
expect $((rc != 0)) "gpu_check.sh on the stand-ins: exit 0 (got $rc)"
python3 "$root/scripts/gpu_result.py" check "$result" --expect-status pass >/dev/null
expect $? "the result file parses, summary pass"
[ "$(field "$result" nvidia_smi gpu)" = NVIDIA_H200 ] && [ "$(field "$result" nvidia_smi gpus)" = 1 ] &&
  [ "$(field "$result" nvidia_smi driver)" = 580.159.04 ]
expect $? "nvidia_smi: the GPU, their count, the driver"
for step in device_check header_checks fashion_mnist_np1 fashion_mnist_fp16_np1 fashion_mnist_bf16_np1 \
  resnet_cifar10_np1 resnet_cifar10_shard3_np1 transformer_lm_np1 transformer_lm_shard2_np1 imagenet_resnet_np1; do
  [ "$(field "$result" "$step" status)" = pass ]
  expect $? "$step passed"
done
[ "$(field "$result" fashion_mnist_np1 images_per_sec)" = 1234.5 ]
expect $? "an example's images/s from its last epoch line"
[ "$(field "$result" imagenet_amp_loss_scale status)" = pass ] &&
  [ "$(field "$result" imagenet_amp_loss_scale loss_scale_grown)" = 1 ] &&
  [ "$(field "$result" imagenet_amp_loss_scale loss_scale_shrunk)" = 1 ] &&
  [ "$(field "$result" imagenet_amp_loss_scale overflow_lines)" = 4 ]
expect $? "imagenet_amp_loss_scale: grown and shrunk from the TensorBoard file, the overflow lines counted"
for config in resnet50_fp16 resnet50_fp32 resnet18_cifar_fp32 resnet18_cifar_fp16; do
  [ "$(field "$result" "bench_${config}_ptrain" images_per_sec)" = 1280.0 ] &&
    [ "$(field "$result" "bench_${config}_ptrain" peak_in_use_mib)" = 20000 ] &&
    [ "$(field "$result" "bench_${config}_pytorch" images_per_sec)" = 2560.0 ]
  expect $? "bench $config: ptrain's and PyTorch's figures"
done
python3 "$root/scripts/gpu_result.py" table "$result" | grep -q "| resnet50 | fp16 | 128 | 1280.0 | 2560.0 | 0.50 | 20000 | 15000 |"
expect $? "the table pairs ptrain with PyTorch"
[ "$(field "$result" fashion_mnist_np2 status)" = skipped ] &&
  field "$result" fashion_mnist_np2 note | grep -q "refused as expected in fashion_mnist_np2" &&
  [ "$(field "$result" transformer_lm_pipeline_np2 status)" = skipped ]
expect $? "two ranks under the bundle's mpiexec on one GPU: refused once, the rest skipped"

# A program that hangs: cut off at its phase's end, the steps after it in that phase not run.
rm -rf "$work/unpacked"
FAKE_HANG=resnet_cifar10 PATH=$work/path:$PATH bash "$root/scripts/gpu_check.sh" "$work/hang" --bundle "$work/bundle" \
  --budget 40 >"$work/hang.log" 2>&1
rc=$?
result=$work/hang/gpu_check_result.txt
expect $((rc != 1)) "a hanging example: exit 1 (got $rc)"
[ "$(field "$result" resnet_cifar10_np1 status)" = fail ] && field "$result" resnet_cifar10_np1 note | grep -q "timed out"
expect $? "the hanging step failed as timed out"
[ "$(field "$result" transformer_lm_np1 status)" = skipped ] &&
  field "$result" transformer_lm_np1 note | grep -q "time budget"
expect $? "the examples after it skipped for the budget"
[ "$(field "$result" bench_resnet50_fp16_ptrain status)" = pass ]
expect $? "the throughput phase still ran"
seconds=$(grep -o 'summary=.* seconds=[0-9]*' "$result" | sed 's/.*seconds=//')
[ "${seconds:-999}" -le 45 ]
expect $? "the run kept to its budget of 40 s (took ${seconds:-?} s)"

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "gpu_bundle.sh and gpu_check.sh on stand-ins: as documented"
