#!/bin/sh
# resume_smoke.sh DIR PROGRAM ARGS...: an example's checkpoints end to end (PROGRAM may be mpiexec
# -n N and the example).
#   1. PROGRAM ARGS --checkpoint-dir DIR saves a checkpoint at the end of each epoch (the last two
#      kept); the same command again (DIR.again) must end with the same weights, byte for byte
#      (model*.safetensors of the last checkpoint: reproducible by default); the newest is removed,
#      as if the run had been stopped during its last epoch;
#   2. PROGRAM ARGS --checkpoint-dir DIR --resume continues from the one before to ARGS' --epochs
#      (the total) and must exit 0, so reach ARGS' floor, having said where it resumed and ending
#      with its total run time, and with the straight run's weights, byte for byte; its CSV log
#      (--csv DIR/log.csv) continues the first run's, the last epoch's row replaced, so that it
#      lists the same epochs once each;
#   3. the same with $OTHER_MODEL (flags that make another model, as ptrain_example_resume sets it;
#      an example with one model sets none)
#      and 4. with a corrupt manifest must fail, naming the file and the mismatch, and leave DIR as it was.
set -u
dir=$1
shift
fail() { echo "resume_smoke: $*" >&2; exit 1; }
newest() { for d in "$1"/step-*; do echo "${d##*/step-} $d"; done | sort -n | tail -n 1 | cut -d' ' -f2-; }
# same_weights A B WHAT: the model*.safetensors of checkpoint folders A and B are the same bytes.
same_weights() {
  found=0
  for file in "$1"/model*.safetensors; do
    [ -f "$file" ] || break
    found=1
    cmp "$file" "$2/${file##*/}" || fail "$3: $2/${file##*/} differs from $file"
  done
  [ "$found" = 1 ] || fail "no model*.safetensors in $1"
}
rm -rf "$dir" "$dir.again" "$dir.straight"
log=$dir/log.csv
"$@" --checkpoint-dir "$dir" --csv "$log" || fail "the first run failed"
[ "$(ls -d "$dir"/step-* | wc -l)" -eq 2 ] || fail "expected the last 2 checkpoints under $dir"
epochs=$(cut -d, -f1 "$log")
[ "$(echo "$epochs" | wc -l)" -ge 3 ] || fail "$log: expected a header and a row per epoch, got: $epochs"
"$@" --checkpoint-dir "$dir.again" --csv "$dir.again.csv" >/dev/null || fail "the second run failed"
same_weights "$(newest "$dir")" "$(newest "$dir.again")" "the same command twice"
rm -rf "$dir.again" "$dir.again.csv"
straight=$(newest "$dir")
mv "$straight" "$dir.straight"
out=$("$@" --checkpoint-dir "$dir" --csv "$log" --resume 2>&1) || { echo "$out"; fail "the resumed run failed"; }
echo "$out"
echo "$out" | grep -q "Trainer: resuming from $dir/step-" || fail "the resumed run did not say where it resumed"
echo "$out" | grep -qE "^total run time [0-9]+\.[0-9] s$" || fail "the run did not end with its total run time"
[ "$(newest "$dir")" = "$straight" ] || fail "the resumed run's last checkpoint is $(newest "$dir"), the straight run's was $straight"
same_weights "$dir.straight" "$straight" "resumed against the straight run"
rm -rf "$dir.straight"
[ "$(cut -d, -f1 "$log")" = "$epochs" ] || fail "$log: the resumed run's log lists the epochs $(cut -d, -f1 "$log" | tr '\n' ' '), the first run's $(echo "$epochs" | tr '\n' ' ')"

before=$(find "$dir" -type f -exec cksum {} + | sort)
if [ -n "${OTHER_MODEL:-}" ]; then
  # shellcheck disable=SC2086 # OTHER_MODEL is flags, split at spaces
  out=$("$@" $OTHER_MODEL --checkpoint-dir "$dir" --csv "$log" --resume 2>&1) &&
    fail "resuming another model's checkpoint succeeded"
  echo "$out"
  echo "$out" | grep -qE "model(\.part-[0-9]+-of-[0-9]+)?\.safetensors: the state dict does not match the model" ||
    fail "another model's checkpoint: the error does not name the weights file and the mismatch"
fi
latest=$(newest "$dir")
cp "$latest/manifest.txt" "$dir/manifest.good"
printf 'ptrain-checkpoint 1\nstep 5\n' >"$latest/manifest.txt"
out=$("$@" --checkpoint-dir "$dir" --csv "$log" --resume 2>&1) && fail "resuming from a corrupt manifest succeeded"
echo "$out"
echo "$out" | grep -q "$latest/manifest.txt: the manifest has no 'epoch' line" ||
  fail "a corrupt manifest: the error does not name the file and the missing field"
mv "$dir/manifest.good" "$latest/manifest.txt"
after=$(find "$dir" -type f -exec cksum {} + | sort)
[ "$before" = "$after" ] || fail "a refused --resume changed files under $dir"
echo "resume_smoke: passed"
