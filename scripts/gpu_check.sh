#!/usr/bin/env bash
# The GPU run of ptrain (docs/gpu_run.md), on a machine with a GPU and the bundle scripts/gpu_bundle.sh
# made here (gpu-bundle/, carried there). Each step has its own time limit, inside one budget for
# the whole run (480 s unless --budget says otherwise), so that one hang cannot spend it all:
#   bundle       the archive checked against its manifest (sha256) and unpacked; glibc new enough
#   loader       every bundled program's libraries found: the bundle's lib/, then the CUDA, cuBLAS,
#                NCCL and cuDNN libraries of the image's PyTorch (python3's `nvidia` packages)
#   nvidia_smi   the first GPU call; then cuda_device_check (the ctest check cuda/device_check)
#   the CUDA examples' smoke runs on one process, as their ctest entries run them (with their floors),
#   fp16 and bf16 mixed precision, Sharded over NCCL, and imagenet_resnet_cuda in fp16 AMP until the
#   loss scale has both shrunk and grown (read from its TensorBoard scalars)
#   images/s and GPU memory of ResNet-50 (224x224, batch 128) and CIFAR ResNet-18 (batch 128), fp16
#   AMP and fp32, of ptrain (bench_cuda_throughput) and of the image's PyTorch (cuDNN,
#   channels_last, AMP: bench/torch_cuda_peer.py), one process per configuration
#   two ranks under the bundle's mpiexec (NCCL collectives, the pipeline's sends over NCCL): run
#   where there are two GPUs; on one GPU, ptrain refuses a second rank on the same GPU (NCCL does
#   too), which one run confirms and the step records as skipped
# It writes OUT_DIR/gpu_check.log (everything printed) and OUT_DIR/gpu_check_result.txt (a line per
# step: scripts/gpu_result.py reads and checks it; `gpu_result.py table` makes docs/gpu_run.md's tables).
#
# Usage: scripts/gpu_check.sh OUT_DIR [--bundle DIR] [--budget SECONDS]
# Exit status: 0 every step passed or was skipped for the reason its note gives; 1 a step failed;
# 2 bad usage, or no bundle, or one that is corrupt or unfit for this host; 3 no CUDA device (said
# as "no CUDA device" at the first GPU call, with the result file written, its summary no_device).
set -uo pipefail
export LC_ALL=C  # EPOCHREALTIME's decimal point, sort -V, the programs' number formats

root=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  echo "usage: scripts/gpu_check.sh OUT_DIR [--bundle DIR] [--budget SECONDS]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
out=$1
shift
bundle=$root/gpu-bundle
budget=480
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) [ $# -ge 2 ] || usage; bundle=$2; shift 2 ;;
    --budget) [ $# -ge 2 ] || usage; budget=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ $budget =~ ^[0-9]+$ ]] || usage
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
log=$out/gpu_check.log
result=$out/gpu_check_result.txt
: >"$log"
: >"$result"
# Unpacked bundle and each step's output: outside OUT_DIR, which comes back whole.
work=${PTRAIN_GPU_CHECK_WORK:-${TMPDIR:-/tmp}/ptrain-gpu-check}
rm -rf "$work" && mkdir -p "$work" || exit 2
stage=$work/bundle
python=${PTRAIN_GPU_CHECK_PYTHON:-python3}

start_us=${EPOCHREALTIME/./}
elapsed() { echo $(((${EPOCHREALTIME/./} - start_us) / 1000000)); }
seconds_since() { awk -v a="$1" -v b="${EPOCHREALTIME/./}" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
say() { printf '%s\n' "$*" | tee -a "$log"; }

passed=0 failed=0 skipped=0
# record STEP STATUS SECONDS [FIGURES...]: one line of the result file. A figure `note=...` (free
# text, newlines flattened) goes last.
record() {
  local step=$1 status=$2 seconds=$3 note="" line
  shift 3
  line="step=$step status=$status seconds=$seconds"
  for field in "$@"; do
    case $field in
      note=*) note=${field#note=} ;;
      *) line+=" $field" ;;
    esac
  done
  note=$(printf '%s' "$note" | tr '\n\t' '  ')
  [ -n "$note" ] && line+=" note=$note"
  printf '%s\n' "$line" >>"$result"
  case $status in
    pass) passed=$((passed + 1)) ;;
    fail) failed=$((failed + 1)) ;;
    skipped) skipped=$((skipped + 1)) ;;
  esac
  say "---- $step: $status in ${seconds} s${note:+ ($note)}"
}

# finish STATUS EXIT: the summary line, the steps once more, and the exit.
finish() {
  printf 'summary=gpu_check status=%s exit=%s passed=%d failed=%d skipped=%d seconds=%s\n' "$1" "$2" \
    "$passed" "$failed" "$skipped" "$(elapsed)" >>"$result"
  say "==== gpu_check: $1 (exit $2) after $(elapsed) s; $result"
  "$python" "$root/scripts/gpu_result.py" check "$result" 2>&1 | tee -a "$log"
  exit "$2"
}

# run_step NAME LIMIT PHASE_END CMD...: CMD in $work with its own time limit, LIMIT seconds or what
# is left before PHASE_END (seconds from the start), its output in the log and in $work/NAME.out.
# Sets step_rc (124: timed out; 200: not run, the phase's time was spent) and step_seconds.
run_step() {
  local name=$1 limit=$2 phase_end=$3 left
  shift 3
  left=$((phase_end - $(elapsed)))
  [ "$left" -lt "$limit" ] && limit=$left
  step_seconds=0
  if [ "$limit" -lt 5 ]; then
    step_rc=200
    return
  fi
  say "==== $name (limit ${limit} s): $*"
  local t0=${EPOCHREALTIME/./}
  # No step reads stdin: mpiexec would forward it to rank 0 and die of SIGPIPE when a rank ends first.
  (cd "$work" && timeout -k 10 "$limit" "$@" </dev/null) 2>&1 | tee "$work/$name.out" >>"$log"
  step_rc=${PIPESTATUS[0]}
  step_seconds=$(seconds_since "$t0")
  tail -n 5 "$work/$name.out"
}

# Records the step just run by exit status: pass on 0, else fail saying why.
record_by_rc() {
  local name=$1
  shift
  case $step_rc in
    0) record "$name" pass "$step_seconds" "$@" ;;
    200) record "$name" skipped 0 "note=not run: its phase's share of the run's time budget was spent" ;;
    124 | 137) record "$name" fail "$step_seconds" "$@" "note=timed out" ;;
    *) record "$name" fail "$step_seconds" "$@" "note=exit $step_rc: $(grep -v '^\s*$' "$work/$name.out" | tail -n 1 | cut -c1-300)" ;;
  esac
}

# ---- the bundle
t0=${EPOCHREALTIME/./}
manifest=$bundle/MANIFEST.txt
archive=$bundle/ptrain-gpu.tar.xz
printf 'run=gpu_check version=1 started=%s host=%s bundle=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${HOSTNAME:-$(uname -n)}" \
  "$(sed -n 's/^# made: .* from commit \([0-9a-f]*\).*/\1/p' "$manifest" 2>/dev/null | head -n 1)" >>"$result"
say "gpu_check: bundle $bundle, results in $out, budget $budget s"
if [ ! -f "$manifest" ] || [ ! -f "$archive" ]; then
  record bundle fail "$(seconds_since "$t0")" "note=no bundle at $bundle (MANIFEST.txt and ptrain-gpu.tar.xz): make one with scripts/gpu_bundle.sh and carry it (docs/gpu_run.md)"
  finish fail 2
fi
want_sha=$(awk '$1 == "#" && $2 == "archive:" { print $5 }' "$manifest")
have_sha=$(sha256sum "$archive" | cut -d' ' -f1)
if [ "$want_sha" != "$have_sha" ]; then
  record bundle fail "$(seconds_since "$t0")" "note=$archive has sha256 $have_sha, MANIFEST.txt says ${want_sha:-nothing}: a partial copy?"
  finish fail 2
fi
mkdir -p "$stage"
if ! { tar -xJf "$archive" -C "$stage" 2>>"$log" ||
       "$python" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$stage"; }; then
  record bundle fail "$(seconds_since "$t0")" "note=could not unpack $archive (neither tar -J nor python3's tarfile)"
  finish fail 2
fi
# Every file against the manifest's sha256 (lines: SHA256 BYTES PATH WHAT...).
if ! awk '!/^#/ && NF >= 3 { print $1 "  " $3 }' "$stage/MANIFEST.txt" | (cd "$stage" && sha256sum -c --quiet) >>"$log" 2>&1; then
  record bundle fail "$(seconds_since "$t0")" "note=unpacked files differ from MANIFEST.txt (see the log)"
  finish fail 2
fi
need_glibc=$(sed -n 's/^# glibc: \([0-9.]*\).*/\1/p' "$stage/MANIFEST.txt")
have_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
files=$(awk '!/^#/ && NF >= 3' "$stage/MANIFEST.txt" | wc -l)
if [ -n "$need_glibc" ] && [ -n "$have_glibc" ] &&
   [ "$(printf '%s\n%s\n' "$need_glibc" "$have_glibc" | sort -V | head -n 1)" != "$need_glibc" ]; then
  record bundle fail "$(seconds_since "$t0")" "note=the bundle needs glibc $need_glibc, this host has $have_glibc: build it on an older system"
  finish fail 2
fi
record bundle pass "$(seconds_since "$t0")" "files=$files" "glibc=${have_glibc:-unknown}" "needs_glibc=${need_glibc:-unknown}"
bin=$stage/bin
data=$stage/data

# ---- the loader: the bundle's libraries first, then the image's CUDA libraries, PyTorch's
# `nvidia` packages (cuBLAS, NCCL, cuDNN) before the toolkit's.
t0=${EPOCHREALTIME/./}
torch_libs=$("$python" -c '
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
dirs = []
for base in nvidia.__path__:
    dirs += sorted(glob.glob(os.path.join(base, "*", "lib")))
print(":".join(d for d in dirs if os.path.isdir(d)))' 2>/dev/null)
libpath=$stage/lib${torch_libs:+:$torch_libs}
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$dir" ] && libpath+=:$dir
done
libpath+=${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say "LD_LIBRARY_PATH for the bundle's programs: $libpath"
missing=""
for program in "$bin"/*; do
  gone=$(LD_LIBRARY_PATH=$libpath ldd "$program" 2>&1 | awk '/not found/ { print $1 }' | paste -sd, -)
  [ -n "$gone" ] && missing+=" $(basename "$program"): $gone;"
done
if [ -n "$missing" ]; then
  record loader fail "$(seconds_since "$t0")" "note=libraries not found:$missing"
else
  record loader pass "$(seconds_since "$t0")" "torch_nvidia_libs=$([ -n "$torch_libs" ] && echo found || echo none)"
fi
# The bundle's programs: its libraries, its mpiexec (hydra finds its proxy beside it).
ours=(env "LD_LIBRARY_PATH=$libpath" "PATH=$bin:$PATH")
has() { [ -x "$bin/$1" ]; }
not_bundled() { record "$1" skipped 0 "note=$2 is not in the bundle (see MANIFEST.txt's missing line)"; }

# ---- the first GPU call
gate_end=$((budget * 31 / 100))
t0=${EPOCHREALTIME/./}
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  run_step nvidia_smi 20 "$gate_end" nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader,nounits
  gpus=$(grep -c '^[0-9]' "$work/nvidia_smi.out")
  if [ "$step_rc" = 0 ] && [ "$gpus" -gt 0 ]; then
    IFS=, read -r _ name memory driver <"$work/nvidia_smi.out"
    name=$(printf '%s' "$name" | xargs | tr ' ' _)
    record nvidia_smi pass "$step_seconds" "gpus=$gpus" "gpu=$name" "memory_total_mib=${memory// /}" "driver=${driver// /}"
    nvidia-smi >>"$log" 2>&1
  else
    record nvidia_smi no_device "$step_seconds" "note=nvidia-smi found no GPU: $(head -n 1 "$work/nvidia_smi.out")"
  fi
else
  record nvidia_smi no_device "$(seconds_since "$t0")" "note=no nvidia-smi on PATH"
fi
# cuda_device_check asks the CUDA runtime itself: "no CUDA device found" and exit 2 end the run.
if has cuda_device_check; then
  run_step device_check 120 "$gate_end" "${ours[@]}" "$bin/cuda_device_check"
  if [ "$step_rc" = 2 ] && grep -q "no CUDA device found" "$work/device_check.out"; then
    why=$(grep -m1 "no CUDA device found" "$work/device_check.out")
    record device_check no_device "$step_seconds" "note=$why"
    say "gpu_check: no CUDA device ($why)"
    finish no_device 3
  fi
  record_by_rc device_check
elif [ "$gpus" = 0 ]; then
  say "gpu_check: no CUDA device (nvidia-smi found none, and the bundle has no cuda_device_check to ask CUDA)"
  finish no_device 3
else
  not_bundled device_check cuda_device_check
fi
if has cuda_header_checks; then
  run_step header_checks 20 "$gate_end" "${ours[@]}" "$bin/cuda_header_checks"
  record_by_rc header_checks
else
  not_bundled header_checks cuda_header_checks
fi

# ---- the CUDA examples, one process each, with the ctest smoke runs' arguments and floors
examples_end=$((budget * 60 / 100))
# example STEP LIMIT PROGRAM ARGS...: the last epoch line's img/s as the step's figure.
example() {
  local name=$1 limit=$2 program=$3
  shift 3
  if ! has "$program"; then
    not_bundled "$name" "$program"
    return
  fi
  run_step "$name" "$limit" "$examples_end" "${ours[@]}" "$bin/$program" "$@"
  local ips
  ips=$(sed -n 's/.* \([0-9.]*\) img\/s.*/\1/p' "$work/$name.out" | tail -n 1)
  record_by_rc "$name" ${ips:+"images_per_sec=$ips"}
}
fashion=(--data "$data/fashion_mnist" --epochs 1 --limit 2048 --batch 64 --min-accuracy 55)
cifar=(--data "$data/cifar10" --batch 16 --epochs 3 --lr 0.02 --min-accuracy 70)
lm=(--data "$data/wikitext" --emsize 32 --nhid 64 --nlayers 2 --nhead 2 --dropout 0.1 --bptt 16 --batch 16
    --lr 0.5 --epochs 5 --max-perplexity 4)
imagenet=(--data "$data/imagenet" --batch 6 --epochs 4 --lr 0.002 --image-size 64 --workers 1 --min-accuracy 60
          --arch resnet18)
example fashion_mnist_np1 60 fashion_mnist_cuda "${fashion[@]}" --csv "$work/fashion_np1.csv"
example fashion_mnist_fp16_np1 60 fashion_mnist_cuda "${fashion[@]}" --precision fp16 --csv "$work/fashion_fp16.csv"
example fashion_mnist_bf16_np1 60 fashion_mnist_cuda "${fashion[@]}" --precision bf16 --csv "$work/fashion_bf16.csv"
example resnet_cifar10_np1 90 resnet_cifar10_cuda "${cifar[@]}"
example resnet_cifar10_shard3_np1 90 resnet_cifar10_cuda "${cifar[@]}" --shard 3
example transformer_lm_np1 90 transformer_lm_cuda "${lm[@]}"
example transformer_lm_shard2_np1 90 transformer_lm_cuda "${lm[@]}" --shard 2
example imagenet_resnet_np1 120 imagenet_resnet_cuda "${imagenet[@]}" --csv "$work/imagenet_np1.csv"
# fp16 AMP from a loss scale of 2^24 that must overflow (halved on each skipped step) and a window
# of 4 clean steps to double it again: both moves of Apex's rule within 48 steps.
if has imagenet_resnet_cuda; then
  name=imagenet_amp_loss_scale
  run_step "$name" 120 "$examples_end" "${ours[@]}" "$bin/imagenet_resnet_cuda" --data "$data/imagenet" --arch resnet18 \
    --batch 6 --epochs 6 --lr 0.002 --image-size 64 --workers 1 --loss-scale 16777216 --loss-scale-window 4 \
    --tensorboard "$work/imagenet_amp_tensorboard"
  if [ "$step_rc" = 0 ]; then
    scales=$("$python" "$root/scripts/gpu_result.py" loss-scales "$work/imagenet_amp_tensorboard" 2>&1)
    overflows=$(grep -c "Gradient overflow. Skipping step" "$work/$name.out")
    say "loss scales: $scales; $overflows overflow line(s)"
    read -r -a figures <<<"$scales"
    case $scales in
      *grown=1*shrunk=1*) record "$name" pass "$step_seconds" "${figures[@]/#/loss_scale_}" "overflow_lines=$overflows" ;;
      *) record "$name" fail "$step_seconds" "overflow_lines=$overflows" "note=the loss scale did not both shrink and grow: $scales" ;;
    esac
  else
    record_by_rc "$name"
  fi
else
  not_bundled imagenet_amp_loss_scale imagenet_resnet_cuda
fi

# ---- images/s and GPU memory, ptrain and PyTorch, one process per configuration
bench_end=$((budget * 94 / 100))
# bench_line STEP IMPL: the step's record from the bench's one line of figures.
bench_line() {
  local name=$1 impl=$2 line
  line=$(grep -m1 "^bench=cuda_throughput .*impl=$impl" "$work/$name.out")
  if [ "$step_rc" = 0 ] && [ -n "$line" ] && [[ $line != *status=error* ]]; then
    read -r -a figures <<<"${line#bench=cuda_throughput }"
    record "$name" pass "$step_seconds" "${figures[@]}"
  elif [[ $line == *status=error* ]]; then
    record "$name" fail "$step_seconds" "note=${line#*note=}"
  elif [ "$impl" = pytorch ] && [ "$step_rc" = 3 ]; then
    record "$name" skipped "$step_seconds" "note=$(tail -n 1 "$work/$name.out")"
  else
    record_by_rc "$name"
  fi
}
for config in "resnet50 fp16" "resnet50 fp32" "resnet18_cifar fp32" "resnet18_cifar fp16"; do
  read -r model precision <<<"$config"
  name=bench_${model}_${precision}_ptrain
  if has bench_cuda_throughput; then
    run_step "$name" 60 "$bench_end" "${ours[@]}" "$bin/bench_cuda_throughput" "$model" "$precision" 128 10 10
    bench_line "$name" ptrain
  else
    not_bundled "$name" bench_cuda_throughput
  fi
  name=bench_${model}_${precision}_pytorch
  run_step "$name" 60 "$bench_end" "$python" "$root/bench/torch_cuda_peer.py" "$model:$precision" 128 10 10
  bench_line "$name" pytorch
done

# ---- two ranks under the bundle's mpiexec
multi_end=$((budget * 98 / 100))
refused=""
two_ranks() {
  local name=$1 program=$2
  shift 2
  if ! has "$program" || ! has mpiexec; then
    not_bundled "$name" "$program or mpiexec"
    return
  fi
  if [ -n "$refused" ]; then
    record "$name" skipped 0 "note=one GPU: $refused"
    return
  fi
  run_step "$name" 90 "$multi_end" "${ours[@]}" "$bin/mpiexec" -launcher fork -n 2 "$bin/$program" "$@"
  # Seen on a loaded host: hydra died of SIGPIPE before any rank wrote a line, once twice in a row.
  # Up to two more tries a second apart, then the step's own verdict.
  local try=1
  while [ "$step_rc" = 141 ] && [ ! -s "$work/$name.out" ] && [ "$try" -lt 3 ]; do
    try=$((try + 1))
    say "$name: mpiexec died of SIGPIPE before starting the ranks; try $try of 3"
    sleep 1
    run_step "$name" 90 "$multi_end" "${ours[@]}" "$bin/mpiexec" -launcher fork -n 2 "$bin/$program" "$@"
  done
  if [ "$step_rc" != 0 ] && [ "$gpus" -lt 2 ] && grep -q "NCCL needs one GPU per rank" "$work/$name.out"; then
    refused="ptrain's NcclComm takes one GPU per rank, as NCCL does (refused as expected in $name)"
    record "$name" skipped "$step_seconds" "note=one GPU: $refused"
  else
    record_by_rc "$name"
  fi
}
two_ranks fashion_mnist_np2 fashion_mnist_cuda "${fashion[@]}" --compression fp16 --csv "$work/fashion_np2.csv"
two_ranks fashion_mnist_pipeline_np2 fashion_mnist_cuda "${fashion[@]}" --stages 2 --csv "$work/fashion_pipeline.csv"
two_ranks resnet_cifar10_np2 resnet_cifar10_cuda "${cifar[@]}" --compression fp16
two_ranks transformer_lm_pipeline_np2 transformer_lm_cuda "${lm[@]}" --stages 2 --chunks 4 --schedule gpipe

if [ "$failed" -gt 0 ]; then finish fail 1; fi
finish pass 0
