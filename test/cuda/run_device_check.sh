#!/usr/bin/env bash
# ctest wrapper for a CUDA program (cuda/device_check, the examples' CUDA builds): its exit 0
# passes. Its exit 2 with "no CUDA device found" on stderr is reported as NOT RUN and exits 77,
# which the ctest entries declare as their SKIP_RETURN_CODE: a program that could not run is
# Skipped, never passed. Anything else fails.
#   run_device_check.sh PROGRAM [ARGS...]
set -u
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ "$rc" -eq 2 ] && grep -q "no CUDA device found" "$err"; then
  echo "CUDA device tests NOT RUN: no CUDA device ($(basename "$1") compiled for the GPU but was not run: $(head -n 1 "$err"))"
  exit 77
fi
exit "$rc"
