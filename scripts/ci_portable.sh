#!/usr/bin/env bash
# The float-sensitive unit tests built for baseline x86-64 (-march=x86-64-v2: SSE4.2, no AVX, no
# FMA) instead of -march=native, in build-portable/, and run by ctest with OpenBLAS on its SSE
# kernels (OPENBLAS_CORETYPE; Debian's OpenBLAS picks them at run time). Vector width and fused
# multiply-adds change the order and rounding of sums, so a tolerance that holds only on the CI
# host fails here first. Built header-only (PTRAIN_HEADER_ONLY): the main build's tests link the
# prebuilt library, so these are where header-only use stays tested. Exits non-zero when a build
# step or a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

# train's tests are trainers composed of the same kernels and optimizers (their equalities with the
# serial run hold to the tolerances checked here in the other areas): left out by default to keep CI
# under 45 minutes on 2 cores, PTRAIN_PORTABLE_AREAS="... train" (or "all") adds them.
areas=(${PTRAIN_PORTABLE_AREAS:-kernels autograd nn optim parallel})
[ "${areas[*]}" = all ] && areas=(kernels autograd nn optim train parallel)
cmake -S . -B build-portable $(generator_for build-portable) -DCMAKE_BUILD_TYPE=Release -DPTRAIN_CUDA=OFF -DPTRAIN_NATIVE_ARCH=OFF \
  -DPTRAIN_HEADER_ONLY=ON -DPTRAIN_BUILD_EXAMPLES=OFF -DPTRAIN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v2
cmake --build build-portable -j "$jobs" --target "${areas[@]/#/test_}"
regex="^($(IFS='|'; echo "${areas[*]}"))/"
# The torchvision files the main build's fixture wrote (nn/make_torchvision_conversions: the same
# scripts and torch, 40 to 80 s here), as hard links, which the fixture here finds up to date.
# Beside the main build's ctest (scripts/test.sh names its console log in PTRAIN_MAIN_CTEST_LOG)
# they are taken once that fixture has ended, never while it writes them (waiting at most 20
# minutes; then the fixture here writes its own).
if [ -n "${PTRAIN_MAIN_CTEST_LOG:-}" ]; then
  for _ in $(seq 600); do
    grep -qE "Test +#[0-9]+: nn/make_torchvision_conversions |^Total Test time" "$PTRAIN_MAIN_CTEST_LOG" 2>/dev/null && break
    sleep 2
  done
fi
converted=test/data/torchvision_conversions
if [ -d "build/$converted" ] && [ ! -e "build-portable/$converted" ]; then
  mkdir -p "build-portable/$(dirname "$converted")" && cp -al "build/$converted" "build-portable/$converted"
fi
status=0
OPENBLAS_CORETYPE=Nehalem ctest --test-dir build-portable -R "$regex" --output-on-failure -j "$jobs" || status=$?
ccache_summary
exit $status
