#!/bin/sh
# resume_smoke.sh DIR PROGRAM ARGS...: an example's checkpoints end to end.
#   1. PROGRAM ARGS --checkpoint-dir DIR saves a checkpoint at the end of each epoch (the last two
#      kept); the newest is removed, as if the run had been stopped during its last epoch;
#   2. PROGRAM ARGS --checkpoint-dir DIR --resume continues from the one before to ARGS' --epochs
#      (the total) and must exit 0, so reach ARGS' floor, having said where it resumed and ending
#      with its total run time;
#   3. the same with --model resnet50 (another model) and 4. with a corrupt manifest must fail,
#      naming the file and the mismatch, and leave DIR as it was.
set -u
dir=$1
shift
fail() { echo "resume_smoke: $*" >&2; exit 1; }
newest() { for d in "$dir"/step-*; do echo "${d##*/step-} $d"; done | sort -n | tail -n 1 | cut -d' ' -f2-; }
rm -rf "$dir"
"$@" --checkpoint-dir "$dir" || fail "the first run failed"
[ "$(ls -d "$dir"/step-* | wc -l)" -eq 2 ] || fail "expected the last 2 checkpoints under $dir"
rm -r "$(newest)"
out=$("$@" --checkpoint-dir "$dir" --resume 2>&1) || { echo "$out"; fail "the resumed run failed"; }
echo "$out"
echo "$out" | grep -q "Trainer: resuming from $dir/step-" || fail "the resumed run did not say where it resumed"
echo "$out" | grep -qE "^total run time [0-9]+\.[0-9] s$" || fail "the run did not end with its total run time"

before=$(find "$dir" -type f -exec cksum {} + | sort)
out=$("$@" --model resnet50 --checkpoint-dir "$dir" --resume 2>&1) && fail "resuming another model's checkpoint succeeded"
echo "$out"
echo "$out" | grep -q "model.safetensors: the state dict does not match the model" ||
  fail "another model's checkpoint: the error does not name the weights file and the mismatch"
latest=$(newest)
cp "$latest/manifest.txt" "$dir/manifest.good"
printf 'ptrain-checkpoint 1\nstep 5\n' >"$latest/manifest.txt"
out=$("$@" --checkpoint-dir "$dir" --resume 2>&1) && fail "resuming from a corrupt manifest succeeded"
echo "$out"
echo "$out" | grep -q "$latest/manifest.txt: the manifest has no 'epoch' line" ||
  fail "a corrupt manifest: the error does not name the file and the missing field"
mv "$dir/manifest.good" "$latest/manifest.txt"
after=$(find "$dir" -type f -exec cksum {} + | sort)
[ "$before" = "$after" ] || fail "a refused --resume changed files under $dir"
echo "resume_smoke: passed"
