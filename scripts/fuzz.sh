#!/usr/bin/env bash
# Fuzzes one parser with libFuzzer under AddressSanitizer + UndefinedBehaviorSanitizer:
#   scripts/fuzz.sh TARGET SECONDS    TARGET: idx, idx_gzip, cifar10, png, jpeg, image_csv,
#                                     image_mask, safetensors, tensor_cache, checkpoint_manifest,
#                                     checkpoint_rank_state, wikitext, wordpiece (fuzz/<TARGET>_fuzz.cpp)
#   scripts/fuzz.sh all SECONDS       every target in turn, SECONDS each
# Builds build-fuzz/<TARGET>_fuzz with Debian's clang (installed when missing), starts from a
# working copy of the committed seeds (build-fuzz/corpus/<TARGET>, which keeps what the fuzzer
# found interesting between runs) plus fuzz/crashes/<TARGET>, and ends with one line
#   fuzz-summary target=T seconds=S execs=N findings=F artifacts=<crash inputs or ->
# (S: the seconds it ran, fewer than asked when a finding stopped it)
# A finding (crash, sanitizer report, exception other than ptrain::Error, hang over 10 s, more than
# 1 GiB of memory, as the replay driver) stops the run; its input is saved under build-fuzz/artifacts/<TARGET>/. Minimize
# it (<binary> -minimize_crash=1 -runs=10000 <input>), fix the parser, and commit the input under
# fuzz/crashes/<TARGET>/: ctest's fuzz_replay_<TARGET> replays it from then on.
# Exits non-zero when a run had findings.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  sed -n '2,6p' "$0" >&2
  exit 2
fi
if [ "$1" = all ]; then
  status=0
  for source in fuzz/*_fuzz.cpp; do
    target=$(basename "$source" _fuzz.cpp)
    bash "$0" "$target" "$2" || status=1
  done
  exit $status
fi
target=$1 seconds=$2
source=fuzz/${target}_fuzz.cpp
[ -f "$source" ] || { echo "fuzz.sh: no $source: expected one of: $(ls fuzz/*_fuzz.cpp | sed 's|fuzz/||; s|_fuzz.cpp||' | tr '\n' ' ')" >&2; exit 2; }

clang=clang++-14
if ! command -v $clang >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: installing clang-14 and its libFuzzer runtime (libclang-rt-14-dev)"
  apt-get update -qq && apt-get install -y -qq clang-14 libclang-rt-14-dev
fi

mkdir -p build-fuzz/corpus/$target build-fuzz/artifacts/$target fuzz/crashes/$target
binary=build-fuzz/${target}_fuzz
# Rebuilt when the target, the shared header or any ptrain header is newer than the binary.
if [ ! -x "$binary" ] || [ -n "$(find "$source" fuzz/*.hpp include -newer "$binary" -print -quit)" ]; then
  echo "fuzz.sh: building $binary"
  $clang -std=c++20 -O1 -g -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -DPTRAIN_HAS_IMAGE -Iinclude $(pkg-config --cflags eigen3) \
    "$source" -o "$binary" -lpng -ljpeg -lz
fi

cp -n fuzz/corpus/$target/* build-fuzz/corpus/$target/ 2>/dev/null || true
dict=()
[ -f fuzz/$target.dict ] && dict=(-dict=fuzz/$target.dict)
log=build-fuzz/$target.log
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
set +e
start=$SECONDS
"$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=1024 -print_final_stats=1 \
  -artifact_prefix=build-fuzz/artifacts/$target/ "${dict[@]}" \
  build-fuzz/corpus/$target fuzz/crashes/$target 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
ran=$((SECONDS - start))
set -e

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
artifacts=$(sed -n "s/.*Test unit written to \(.*\)/\1/p" "$log" | tr '\n' ' ')
findings=$(sed -n "s/.*Test unit written to \(.*\)/\1/p" "$log" | wc -l)
if [ "$status" -ne 0 ] && [ "$findings" -eq 0 ]; then findings=1; fi  # died without saving an input
echo "fuzz-summary target=$target seconds=$ran execs=${execs:-unknown} findings=$findings artifacts=${artifacts:--}"
exit $((findings > 0))
