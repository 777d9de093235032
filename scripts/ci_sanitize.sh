#!/usr/bin/env bash
# The unit tests (every test/<area> built into test_<area>; not the multi-rank, CUDA or package
# tests) under AddressSanitizer and UndefinedBehaviorSanitizer, in build-sanitize/, run by ctest.
# Any report ends the test with a non-zero exit: UB is not recovered from, ASan halts on the first
# error, leaks included. -O1 keeps the build and the run short; -g1 gives the reports file:line.
# Exits non-zero when a build step or a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

areas=()
for dir in test/*/; do
  area=$(basename "$dir")
  case "$area" in package | cuda | mpi | compile_fail | slurm) continue ;; esac
  compgen -G "$dir*_test.cpp" >/dev/null && areas+=("$area")
done
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Release -DPTRAIN_CUDA=OFF -DPTRAIN_BUILD_EXAMPLES=OFF \
  -DPTRAIN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build build-sanitize -j "$jobs" --target "${areas[@]/#/test_}"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
regex="^($(IFS='|'; echo "${areas[*]}"))/"
ctest --test-dir build-sanitize -R "$regex" --output-on-failure -j "$jobs"
