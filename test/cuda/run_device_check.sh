#!/usr/bin/env bash
# ctest wrapper for a CUDA program: its exit 0 passes; its exit 2 with "no CUDA device found" on
# stderr is reported as NOT RUN and exits 77 (ctest's SKIP_RETURN_CODE), never as a pass.
set -u
program=$1
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$program" 2>"$err"
rc=$?
cat "$err" >&2
if [ "$rc" -eq 2 ] && grep -q "no CUDA device found" "$err"; then
  echo "CUDA device tests NOT RUN: no CUDA device ($(basename "$program") compiled for the GPU but was not run: $(head -n 1 "$err"))"
  exit 77
fi
exit "$rc"
