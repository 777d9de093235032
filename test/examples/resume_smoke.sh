#!/bin/sh
# resume_smoke.sh DIR PROGRAM ARGS...: an example's checkpoints end to end (PROGRAM may be mpiexec
# -n N and the example).
#   1. PROGRAM ARGS --checkpoint-dir DIR saves a checkpoint at the end of each epoch (the last two
#      kept); the newest is removed, as if the run had been stopped during its last epoch;
#   2. PROGRAM ARGS --checkpoint-dir DIR --resume continues from the one before to ARGS' --epochs
#      (the total) and must exit 0, so reach ARGS' floor, having said where it resumed and ending
#      with its total run time; its CSV log (--csv DIR/log.csv) continues the first run's, the last
#      epoch's row replaced, so that it lists the same epochs once each;
#   3. the same with $OTHER_MODEL (flags that make another model, as ptrain_example_resume sets it)
#      and 4. with a corrupt manifest must fail, naming the file and the mismatch, and leave DIR as it was.
set -u
dir=$1
shift
fail() { echo "resume_smoke: $*" >&2; exit 1; }
newest() { for d in "$dir"/step-*; do echo "${d##*/step-} $d"; done | sort -n | tail -n 1 | cut -d' ' -f2-; }
rm -rf "$dir"
log=$dir/log.csv
"$@" --checkpoint-dir "$dir" --csv "$log" || fail "the first run failed"
[ "$(ls -d "$dir"/step-* | wc -l)" -eq 2 ] || fail "expected the last 2 checkpoints under $dir"
epochs=$(cut -d, -f1 "$log")
[ "$(echo "$epochs" | wc -l)" -ge 3 ] || fail "$log: expected a header and a row per epoch, got: $epochs"
rm -r "$(newest)"
out=$("$@" --checkpoint-dir "$dir" --csv "$log" --resume 2>&1) || { echo "$out"; fail "the resumed run failed"; }
echo "$out"
echo "$out" | grep -q "Trainer: resuming from $dir/step-" || fail "the resumed run did not say where it resumed"
echo "$out" | grep -qE "^total run time [0-9]+\.[0-9] s$" || fail "the run did not end with its total run time"
[ "$(cut -d, -f1 "$log")" = "$epochs" ] || fail "$log: the resumed run's log lists the epochs $(cut -d, -f1 "$log" | tr '\n' ' '), the first run's $(echo "$epochs" | tr '\n' ' ')"

before=$(find "$dir" -type f -exec cksum {} + | sort)
# shellcheck disable=SC2086 # OTHER_MODEL is flags, split at spaces
out=$("$@" ${OTHER_MODEL:?set OTHER_MODEL to flags that make another model} --checkpoint-dir "$dir" --csv "$log" --resume 2>&1) &&
  fail "resuming another model's checkpoint succeeded"
echo "$out"
echo "$out" | grep -qE "model(\.part-[0-9]+-of-[0-9]+)?\.safetensors: the state dict does not match the model" ||
  fail "another model's checkpoint: the error does not name the weights file and the mismatch"
latest=$(newest)
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
