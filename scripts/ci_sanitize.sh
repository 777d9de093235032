#!/usr/bin/env bash
# Unit tests under AddressSanitizer and UndefinedBehaviorSanitizer, in build-sanitize/, run by
# ctest. Any report fails its test: UB is not recovered from, ASan halts on the first error,
# leaks included. -O0: the build is the job's time (the tests run in seconds), and it compiles a
# third faster than -O1; -g1 gives the reports file:line.
#
# The areas: by default every unit-test area but nn, whose tests run whole models (VGG,
# Inception, U-Net: 2 min of the portable job's tests already) and would take most of this job's
# time under ASan, and autograd and train, whose ops and trainers compose the kernels, optimizers,
# checkpoint files and gradient buckets tested here (left out to keep CI under 45 minutes on 2
# cores: autograd's 21 test files were a third of this job's build). PTRAIN_SANITIZE_AREAS="..."
# (or "all") changes the set.
# Exits non-zero when a build step or a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

areas=(${PTRAIN_SANITIZE_AREAS:-core device comm launch io data kernels optim parallel})
if [ "${areas[*]}" = all ]; then
  areas=()
  for dir in test/*/; do
    area=$(basename "$dir")
    case "$area" in package | cuda | mpi | compile_fail | slurm) continue ;; esac
    compgen -G "$dir*_test.cpp" >/dev/null && areas+=("$area")
  done
fi
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B build-sanitize $(generator_for build-sanitize) -DCMAKE_BUILD_TYPE=Release -DPTRAIN_CUDA=OFF -DPTRAIN_BUILD_EXAMPLES=OFF \
  -DPTRAIN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O0 -g1 -DNDEBUG" -DPTRAIN_TEST_OPT_FLAGS= -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build build-sanitize -j "$jobs" --target "${areas[@]/#/test_}"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
regex="^($(IFS='|'; echo "${areas[*]}"))/"
status=0
ctest --test-dir build-sanitize -R "$regex" --output-on-failure -j "$jobs" || status=$?
ccache_summary
exit $status
