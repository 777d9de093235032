#!/bin/sh
# loop_flags_smoke.sh DIR PROGRAM ARGS...: the training-loop flags every example takes
# (examples/common/training_loop.hpp), end to end on one example:
#   1. --val-every 4 --accumulate 2 --ema 0.9 --keep-top-k 2, with --early-stop-patience 1 and a
#      --early-stop-min-delta no change reaches: the run validates at step 4 inside the first epoch,
#      stops at the next validation (its epoch's end), says so, keeps two checkpoints (the better
#      of the two and the newest) and still reaches ARGS' floor;
#   2. a run saving and pruning at every step (--val-every 1 --keep-top-k 1), killed with SIGKILL
#      at three fixed times, each time resumed: every kill leaves a checkpoint that loads, and the
#      last resume trains to the end with one or two checkpoints and nothing half-removed left;
#   3. --summary --lr-find: the summary's parameter total is the model's, the finder suggests a rate,
#      writes its curve beside --csv and the run exits 0 without training;
#   4. --activation-checkpointing: the run says what it checkpoints and still reaches ARGS' floor.
set -u
dir=$1
shift
fail() { echo "loop_flags_smoke: $*" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"

out=$("$@" --epochs 3 --val-every 4 --accumulate 2 --ema 0.9 --early-stop-patience 1 --early-stop-min-delta 100 \
        --keep-top-k 2 --checkpoint-dir "$dir/top" --csv "$dir/top.csv" 2>&1) || { echo "$out"; fail "the first run failed"; }
echo "$out"
echo "$out" | grep -q "^step 4 val_loss" || fail "no validation line at step 4 (--val-every 4)"
echo "$out" | grep -q "stopped early: EarlyStopping: val_accuracy has not improved" || fail "the run did not stop early"
echo "$out" | grep -q "^epoch 2/" && fail "the run went on into epoch 2 after the early stop"
[ "$(ls -d "$dir"/top/step-* | wc -l)" -eq 2 ] || fail "expected 2 checkpoints under $dir/top: $(ls "$dir/top")"

for at in 2.5 4 5.5; do
  resume=""
  ls -d "$dir"/kill/step-* >/dev/null 2>&1 && resume=--resume
  "$@" --epochs 2 --val-every 1 --keep-top-k 1 --checkpoint-dir "$dir/kill" --csv "$dir/kill.csv" $resume >"$dir/run.log" 2>&1 &
  pid=$!
  sleep "$at"
  kill -9 "$pid" 2>/dev/null
  wait "$pid"
done
out=$("$@" --epochs 2 --val-every 1 --keep-top-k 1 --checkpoint-dir "$dir/kill" --csv "$dir/kill.csv" --resume 2>&1) ||
  { echo "$out"; fail "the run resumed after the kills failed"; }
echo "$out" | grep -q "Trainer: resuming from $dir/kill/step-" || fail "the last run did not resume from a checkpoint"
count=$(ls -d "$dir"/kill/step-* | wc -l)
[ "$count" -ge 1 ] && [ "$count" -le 2 ] || fail "expected the best and the newest under $dir/kill: $(ls "$dir/kill")"
leftovers=$(ls -A "$dir/kill" | grep -v '^step-')
[ -z "$leftovers" ] || fail "left under $dir/kill: $leftovers"
out=$("$@" --epochs 1 --summary --lr-find --csv "$dir/lr.csv" 2>&1) || { echo "$out"; fail "the --lr-find run failed"; }
echo "$out"
total=$(echo "$out" | sed -n 's/^Total params: //p' | tr -d ,)
params=$(echo "$out" | sed -n 's/.* \([0-9][0-9]*\) parameters in .*/\1/p' | head -n 1)
[ -n "$total" ] && [ "$total" = "$params" ] || fail "the summary's total '$total' is not the model's $params parameters"
echo "$out" | grep -q "suggested learning rate" || fail "the finder suggested no rate"
[ "$(head -n 1 "$dir/lr_lr_find.csv")" = "lr,loss,smoothed_loss" ] || fail "no finder curve in $dir/lr_lr_find.csv"
if echo "$out" | grep -q "plot in $dir/lr_lr_find.png"; then
  [ "$(head -c 4 "$dir/lr_lr_find.png" | tail -c 3)" = "PNG" ] || fail "$dir/lr_lr_find.png is not a PNG"
fi
echo "$out" | grep -q "^epoch 1/" && fail "the --lr-find run trained"
out=$("$@" --epochs 1 --activation-checkpointing --csv "$dir/ac.csv" 2>&1) ||
  { echo "$out"; fail "the --activation-checkpointing run failed"; }
echo "$out" | grep -q "activation checkpointing on [1-9]" || fail "the run did not say what it checkpoints"
echo "loop_flags_smoke: passed"
