#!/usr/bin/env bash
# Installs what is missing, builds everything (Release, in build/), runs every ctest entry, the
# installed-package test, the portable and the sanitizer jobs (scripts/ci_*.sh), then says which
# CUDA checks were compiled and which could not run.
# Exits non-zero when anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall seconds, printed in the summary: where CI's time goes.
phase_times=() phase_start=$SECONDS
phase_done() { phase_times+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }
bash scripts/setup.sh
. scripts/env.sh

# TensorBoard's own reader (tensorboard from PyPI) checks the examples' event files: a venv made
# once and kept outside the clone (~/.cache, as the torch venv), so that a new clone does not pip
# install it again (17 s here). When pip cannot reach PyPI the reader test fails and says why.
tensorboard_venv=${PTRAIN_TENSORBOARD_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ptrain/tensorboard-venv}
if ! "$tensorboard_venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  { python3 -m venv "$tensorboard_venv" && "$tensorboard_venv/bin/pip" install --quiet tensorboard; } ||
    echo "test.sh: could not install tensorboard into $tensorboard_venv; examples/fashion_mnist/np2_outputs_read will fail" >&2
fi

# PyTorch's references (tools/torch_to_safetensors, nn/torch_conversion_test, the examples' --init
# runs): pip's torch, torchvision and safetensors in bench/torch_venv.sh's venv (~/.cache, made once
# and kept). Where it cannot be made those tests fail and say why.
torch_python=""
if torch_python=$(sh bench/torch_venv.sh); then
  "$torch_python" -c "import torchvision, safetensors" 2>/dev/null ||
    "$(dirname "$torch_python")/pip" install --quiet torchvision safetensors ||
    echo "test.sh: could not install torchvision and safetensors beside torch in $(dirname "$torch_python")" >&2
else
  echo "test.sh: no venv with pip's torch; the PyTorch conversion tests will fail" >&2
fi

# Without a GPU the CUDA code is compiled and never run: one device front-end pass (compute_80 PTX,
# assembled for sm_80 and sm_90) and unoptimised host code take half of nvcc's time, most of the
# build's. A host with a GPU builds what users build (CMAKE_CUDA_ARCHITECTURES 80 90, -O3).
# Of the examples' CUDA builds it compiles four (PTRAIN_CUDA_EXAMPLES=all: the seven): the ones
# whose GPU paths differ (NCCL data parallelism and pipelines, Sharded, fp16 AMP, the transformer);
# VGG-F's, Inception's and UNet's layers are the same ops, which cuda_device_check compiles and runs.
cuda_compile_only=()
cuda_examples=all
if ! nvidia-smi -L >/dev/null 2>&1; then
  cuda_compile_only=(-DCMAKE_CUDA_ARCHITECTURES=OFF "-DCMAKE_CUDA_FLAGS=--generate-code=arch=compute_80,code=[compute_80,sm_80,sm_90]"
                     "-DCMAKE_CUDA_FLAGS_RELEASE=-O0 -DNDEBUG")
  cuda_examples=${PTRAIN_CUDA_EXAMPLES:-fashion_mnist;resnet_cifar10;imagenet_resnet;transformer_lm}
fi
cmake -S . -B build $(generator_for build) -DCMAKE_BUILD_TYPE=Release -DPTRAIN_CUDA=AUTO -DPTRAIN_BUILD_TESTS=ON \
  -DPTRAIN_PYTHON="$tensorboard_venv/bin/python" ${torch_python:+"-DPTRAIN_TORCH_PYTHON=$torch_python"} \
  "-DPTRAIN_CUDA_EXAMPLES=$cuda_examples" "${cuda_compile_only[@]}"
phase_done "setup and configure:"
cmake --build build -j "$jobs"
phase_done "build:"

failed=()
# run_check WHAT LOG COMMAND...: COMMAND with its output in LOG; appends "passed|FAILED SECONDS
# WHAT" to build/checks.status, read into the summary.
run_check() {
  local what=$1 log=$2 start=$SECONDS
  shift 2
  if "$@" >"$log" 2>&1; then
    echo "passed $((SECONDS - start)) $what" >>build/checks.status
  else
    echo "FAILED $((SECONDS - start)) $what" >>build/checks.status
  fi
}
rm -f build/checks.status
# ctest's tests and the jobs' compiles share the cores, so an OpenMP thread that waits at a barrier
# sleeps at once (libgomp's default spins first, taking the time slice of a thread that computes).
# Results are the same either way; the unit tests (PTRAIN_NUM_THREADS=2) ran 28 s -> 19-22 s wall
# under ctest -j2 alone, user time 50 -> 33-39 s.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
ctest_console=build/ctest_console.log  # its closing lists of failed and skipped tests
rm -f "$ctest_console"
# Beside ctest, whose tests keep both cores busy but leave gaps: the installed-package, Conan and
# vcpkg tests and the sanitizer and portable jobs (their own build folders), mostly configuring and
# linking on one core; their output is shown once ctest is done. The portable job takes the
# torchvision files of ctest's fixture once it has ended (PTRAIN_MAIN_CTEST_LOG).
(
  run_check "package test (test/package/run.sh)" build/package_test.log bash test/package/run.sh build
  run_check "Conan package (scripts/test_conan.sh)" build/conan_test.log bash scripts/test_conan.sh
  run_check "vcpkg port (test/vcpkg/run.sh)" build/vcpkg_test.log bash test/vcpkg/run.sh
  run_check "unit tests under ASan + UBSan (scripts/ci_sanitize.sh)" build/ci_sanitize.log bash scripts/ci_sanitize.sh
  run_check "float-sensitive unit tests built for x86-64-v2 (scripts/ci_portable.sh)" build/ci_portable.log \
    env PTRAIN_MAIN_CTEST_LOG="$PWD/$ctest_console" bash scripts/ci_portable.sh
) &
beside_ctest=$!

# The slow set (label slow: long runs whose twins are in the fast set) runs with PTRAIN_SLOW_TESTS=1.
slow=(-LE slow)
[ "${PTRAIN_SLOW_TESTS:-0}" = 1 ] && slow=()
ctest --test-dir build --output-on-failure -j "$jobs" "${slow[@]}" 2>&1 | tee "$ctest_console" || failed+=("ctest")
ctest_log=build/ctest_output.log  # every test's output, kept before ctest -N below rewrites it
cp build/Testing/Temporary/LastTest.log "$ctest_log"
phase_done "ctest:"
wait "$beside_ctest" || true
for log in build/package_test.log build/conan_test.log build/vcpkg_test.log build/ci_sanitize.log build/ci_portable.log; do
  if [ -f "$log" ]; then cat "$log"; fi
done
phase_done "waiting for the checks beside ctest:"
package_log=build/package_test.log
check_results=()
while read -r status seconds what; do
  check_results+=("$what: $status in $seconds s")
  [ "$status" = passed ] || failed+=("$what")
done <build/checks.status
[ "$(wc -l <build/checks.status)" = 5 ] || failed+=("a check that did not report (build/checks.status)")

echo
echo "==== summary ===="
echo "time: $(printf '%s, ' "${phase_times[@]}")$SECONDS s in all"
# The CPU time of the run's processes (user + system: bash's `times` of this shell and every child
# it waited for) against what the cores gave in the same wall time: a run whose cores were busy
# throughout ends sooner only with less work. Then where the builds' compile time went.
times >build/run_times.txt
awk -v wall="$SECONDS" -v cores="$(nproc)" '
  { for (i = 1; i <= NF; i++) { split($i, t, "m"); cpu += t[1] * 60 + t[2] } }
  END { printf "CPU: %.0f s of user and system time, %d cores x %d s: %.0f%% busy\n", cpu, cores, wall,
               wall ? 100 * cpu / (cores * wall) : 0 }' build/run_times.txt
python3 scripts/compile_seconds.py build build-sanitize build-portable | sed "s/^/compiles, /" || echo "compiles: scripts/compile_seconds.py failed (above)"
printf '%s\n' "${check_results[@]}"
ccache_summary
[ -z "${OPENBLAS_CORETYPE:-}" ] || echo "OpenBLAS's kernels: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (scripts/env.sh; the portable job's: Nehalem)"
if ctest --test-dir build -N -R '^cuda/' | grep 'cuda/' >/dev/null; then  # grep -q could end ctest by SIGPIPE (pipefail)
  echo "CUDA compile checks: built with $(command -v nvcc) ($(nvcc --version | grep -o 'release [0-9.]*'))"
  for program in test/cuda/cuda_device_check test/cuda/cuda_header_checks $(cd build && ls -d examples/*_cuda 2>/dev/null); do
    [ -x "build/$program" ] || continue
    # The architectures nvcc was given for it: its flags in flags.make (Makefiles) or on its
    # objects' FLAGS lines in build.ninja.
    target_dir="$(dirname "$program")/CMakeFiles/$(basename "$program").dir/"
    if [ -f build/build.ninja ]; then
      flags=$(awk -v dir="$target_dir" '/^build / { mine = index($2, dir) == 1 } mine && /^  FLAGS = /' build/build.ninja)
    else
      flags=$(cat "build/$target_dir/flags.make" 2>/dev/null || true)
    fi
    archs=$(printf '%s\n' "$flags" | grep -o 'sm_[0-9]*' | sort -u | paste -sd, - || true)
    echo "  compiled: $program${archs:+ (GPU code for $archs)}"
  done
  grep -q "consumer_cuda compiled" "$package_log" && echo "  compiled: test/package/cuda_main.cu against the installed ptrain::cuda"
  [ "$cuda_examples" = all ] || echo "  the examples' CUDA builds compiled: $cuda_examples (PTRAIN_CUDA_EXAMPLES=all: every one)"
  # The GPU run's bundle collected from these programs (ctest gpu/bundle_collect; docs/gpu_run.md).
  bundle_line=$(grep -h "^gpu_bundle: .* MiB that travel" "$ctest_log" 2>/dev/null | tail -n 1 || true)
  [ -z "$bundle_line" ] || echo "  GPU bundle from them (gpu/bundle_collect, xz -1): ${bundle_line#gpu_bundle: }"
  not_run=$(grep -h "NOT RUN" "$ctest_log" "$package_log" 2>/dev/null | grep -v "Slurm" | sed 's/^package test: //' | awk '!seen[$0]++' || true)
  if [ -n "$not_run" ]; then
    echo "CUDA device tests NOT RUN: no CUDA device. These were compiled but could not run here (no GPU):"
    printf '%s\n' "$not_run" | sed 's/^/  /'
  else
    echo "CUDA device tests: ran on the GPU (cuda/device_check, the examples' CUDA builds and the package's consumer_cuda)"
  fi
else
  if nvcc --version >/dev/null 2>&1; then
    echo "CUDA compile checks SKIPPED: nvcc at $(command -v nvcc) works but CMake did not enable CUDA (see the configure output)"
  else
    echo "CUDA compile checks SKIPPED: no CUDA toolkit found (no working nvcc on PATH or in /usr/local/cuda/bin)"
  fi
fi
# test/slurm (label slurm): MPI under a real Slurm and across two network-namespace hosts.
slurm_failed=$(sed -nE 's/^[[:space:]]+[0-9]+ - (slurm\/[^ ]+) \((.*)\)$/\1 (\2)/p' "$ctest_console" | grep -v '(Skipped)' | paste -sd' ' || true)
if [ "$(ctest --test-dir build -N -L slurm | grep -c 'slurm/' || true)" = 0 ]; then
  echo "Slurm tests: not built (they need MPI, which CMake did not find)"
elif [ -n "$slurm_failed" ]; then
  echo "Slurm tests FAILED: $slurm_failed"
elif grep -q "NOT RUN: the Slurm and multi-host tests need root" "$ctest_log"; then
  echo "Slurm tests SKIPPED (NOT RUN): they need root (network namespaces, daemons)"
else
  echo "Slurm tests: ran and passed (srun and sbatch on one node; srun across two network-namespace hosts over TCP)"
fi
if [ ${#slow[@]} -gt 0 ]; then
  echo "slow set not run (PTRAIN_SLOW_TESTS=1 runs it): $(ctest --test-dir build -N -L slow -FA '.*' | sed -nE 's/^ *Test +#[0-9]+: //p' | paste -sd' ')"
fi
# ctest's closing list of entries that did not run (SKIP_RETURN_CODE: no GPU, no root): not passes.
skipped=$(sed -nE 's/^[[:space:]]+[0-9]+ - ([^ ]+) \(Skipped\)$/\1/p' "$ctest_console" | paste -sd' ' || true)
if [ -n "$skipped" ]; then echo "ctest entries SKIPPED (not run, not counted as passed): $skipped"; fi
if [ ${#failed[@]} -eq 0 ]; then
  echo "ALL PASSED: ctest and the installed-package test${skipped:+, besides the skipped entries above}"
else
  echo "FAILED: ${failed[*]}"
  exit 1
fi
