#!/usr/bin/env bash
# ctest gpu/check_without_device: scripts/gpu_check.sh on the bundle gpu/bundle_collect made from
# CI's CUDA build, on a machine without a GPU. It must unpack and check the bundle, find the
# libraries, say "no CUDA device" at its first GPU call (cuda_device_check, from the bundle with
# its libraries, asked the CUDA runtime) and exit 3, leaving a result file scripts/gpu_result.py
# accepts with summary status no_device. Also: no bundle, and a bundle whose archive is not the one
# its manifest names, end with exit 2 and say why. With a GPU here the entry is Skipped (77).
#   check_without_device.sh BUNDLE_DIR WORK_DIR
set -u
bundle=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
if nvidia-smi -L >/dev/null 2>&1; then
  echo "NOT RUN: a GPU is present; gpu/check_without_device checks gpu_check.sh where there is none"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
failures=0
expect() {  # expect CONDITION-EXIT-STATUS WHAT
  if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; failures=$((failures + 1)); fi
}
export PTRAIN_GPU_CHECK_WORK=$work/unpacked

bash "$root/scripts/gpu_check.sh" "$work/out" --bundle "$bundle" >"$work/run.log" 2>&1
rc=$?
cat "$work/run.log"
expect $((rc != 3)) "exit 3 without a CUDA device (got $rc)"
grep -q "gpu_check: no CUDA device" "$work/run.log"
expect $? "it says 'no CUDA device'"
python3 "$root/scripts/gpu_result.py" check "$work/out/gpu_check_result.txt" --expect-status no_device >/dev/null
expect $? "the result file parses, summary status no_device"
for step in bundle loader; do
  [ "$(python3 "$root/scripts/gpu_result.py" get "$work/out/gpu_check_result.txt" "$step" status)" = pass ]
  expect $? "step $step passed before the first GPU call"
done
[ "$(python3 "$root/scripts/gpu_result.py" get "$work/out/gpu_check_result.txt" device_check status)" = no_device ]
expect $? "cuda_device_check from the bundle started and found no device"
grep -q "summary=gpu_check status=no_device exit=3" "$work/out/gpu_check_result.txt" && [ -s "$work/out/gpu_check.log" ]
expect $? "the log and the result file are in OUT_DIR"

bash "$root/scripts/gpu_check.sh" "$work/none" --bundle "$work/no_such_bundle" >"$work/none.log" 2>&1
rc=$?
expect $((rc != 2)) "no bundle: exit 2 (got $rc)"
grep -q "no bundle at" "$work/none/gpu_check_result.txt"
expect $? "no bundle: the result file says so"

mkdir -p "$work/tampered"
printf 'not an archive\n' >"$work/tampered/ptrain-gpu.tar.xz"
sed 's/^# archive: .*/# archive: ptrain-gpu.tar.xz 15 0000000000000000000000000000000000000000000000000000000000000000/' \
  "$bundle/MANIFEST.txt" >"$work/tampered/MANIFEST.txt"
bash "$root/scripts/gpu_check.sh" "$work/tampered_out" --bundle "$work/tampered" >"$work/tampered.log" 2>&1
rc=$?
expect $((rc != 2)) "an archive that is not the manifest's: exit 2 (got $rc)"
grep -q "a partial copy" "$work/tampered_out/gpu_check_result.txt"
expect $? "an archive that is not the manifest's: the result file says so"

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "gpu_check.sh without a GPU: as documented"
