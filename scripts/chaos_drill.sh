#!/usr/bin/env bash
# chaos_drill.sh [--build DIR | --ptrain-run PATH --program PATH] [--work DIR] [--seed S] [--ranks N]
#                [--kills K] [--stops S] [--shrink] [-- FASHION_MNIST_ARGS...]
# ptrain_run against injected failures: the Fashion-MNIST example, data-parallel on N ranks (default
# 2) with a checkpoint every 4 steps, runs once undisturbed and once under
# `ptrain_run --max-restarts`, into which the drill injects, at seeded random times, K SIGKILLs
# (default 3) and S SIGSTOPs (default 1; the stall watchdog's case, with PTRAIN_COLLECTIVE_TIMEOUT
# 4 s unless set) of a random rank: each fault after the running attempt has saved a new checkpoint
# at or past a seeded random step, then a seeded random delay under 0.4 s. The disturbed run must
# end with the undisturbed run's weights, byte for byte (model*.safetensors of the last
# checkpoint, as test/examples/resume_smoke.sh compares them).
# --shrink: one fault that persists (a rank killed, then killed again as soon as the restart
# starts, as a lost host would fail it), under --min-nproc 1: the run must continue on N-1 ranks and
# end within the stated tolerance of the undisturbed run: its final test accuracy within 3 points
# (seeds 0 to 3 of the undisturbed run spread over 2.9 points) and the weights' L2 difference under
# half their norm (a run trained from another start differs by more than their norm). The smaller
# world adds each batch's gradients in another order and draws other dropout masks, so from the
# shrink on it trains as another seed would: not bit for bit.
# Every restart must have resumed (the Trainer says "resuming from" the checkpoint ptrain_run named):
# a restart from the first step would end with the same bytes, only later.
# Prints the faults injected, the restarts, the steps recomputed (estimated: the time from each
# fault's last checkpoint to the fault, at the undisturbed run's step rate) and the time overhead.
# Exit 0 when the run ends as it must; 1 otherwise.
set -u
cd "$(dirname "$0")/.."
build=build run="" program="" work="" seed=1 ranks=2 kills=3 stops=1 shrink=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --ptrain-run) run=$2; shift 2 ;;
    --program) program=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --kills) kills=$2; shift 2 ;;
    --stops) stops=$2; shift 2 ;;
    --shrink) shrink=1; shift ;;
    --) shift; break ;;
    *) echo "chaos_drill: unknown argument '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
every=4
train_args=(--data /usr/share/datasets/fashion-mnist --epochs 3 --limit 2048 --batch 64 --csv "" --checkpoint-every "$every" "$@")
run=${run:-$build/tools/ptrain_run}
program=${program:-$build/examples/fashion_mnist}
[ -x "$run" ] && [ -x "$program" ] || { echo "chaos_drill: build ptrain_run and fashion_mnist in $build first" >&2; exit 2; }
program=$(realpath "$program")  # as /proc/PID/exe names it
work=${work:-$build/chaos_drill_seed$seed}
rm -rf "$work"
mkdir -p "$work"
export PTRAIN_NUM_THREADS=${PTRAIN_NUM_THREADS:-1} PTRAIN_COLLECTIVE_TIMEOUT=${PTRAIN_COLLECTIVE_TIMEOUT:-4}
RANDOM=$seed
fail() { echo "chaos_drill: $*" >&2; exit 1; }
now() { date +%s.%N; }
newest() { # the newest checkpoint's step under $1, -1 for none
  local best=-1 d s
  for d in "$1"/step-*; do
    [ -f "$d/manifest.txt" ] || continue
    s=${d##*/step-}
    [ "$s" -gt "$best" ] && best=$s
  done
  echo "$best"
}
# rank_pid PTRAIN_RUN_PID RANK: the pid of PROGRAM's process on RANK below ptrain_run, empty if none.
rank_pid() {
  local p
  for p in $(descendants "$1"); do
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$program" ] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=$2" && echo "$p" && return
  done
}
descendants() {
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}
same_weights() { # same_weights DIR_A DIR_B: every model*.safetensors the same bytes
  local found=0 f
  for f in "$1"/model*.safetensors; do
    [ -f "$f" ] || break
    found=1
    cmp -s "$f" "$2/${f##*/}" || return 1
  done
  [ "$found" = 1 ]
}

# 1. The undisturbed run.
start=$(now)
"$run" --nproc "$ranks" -- "$program" "${train_args[@]}" --checkpoint-dir "$work/straight" >"$work/straight.log" 2>&1 ||
  { cat "$work/straight.log"; fail "the undisturbed run failed"; }
straight_seconds=$(printf '%.1f' "$(echo "$(now) - $start" | bc)")
last=$(newest "$work/straight")
[ "$last" -gt 0 ] || fail "the undisturbed run left no checkpoint"
# Its step rate: images per second over the global batch, averaged over the epoch lines.
rate=$(awk '/^epoch [0-9]+\/[0-9]+ /{for(i=1;i<=NF;i++) if($i=="img/s"){s+=$(i-1); n++}} END{if(n) printf "%.3f", s/n/64; else print 0}' "$work/straight.log")
echo "chaos_drill: the undisturbed run on $ranks rank(s): $last steps in $straight_seconds s ($rate steps/s)"

# 2. The disturbed run, and the faults.
faults=()
for _ in $(seq 1 "$kills"); do faults+=(KILL); done
for _ in $(seq 1 "$stops"); do faults+=(STOP); done
[ "$shrink" = 1 ] && faults=(LOST)
count=${#faults[@]}
for ((i = count - 1; i > 0; i--)); do # seeded shuffle
  j=$((RANDOM % (i + 1)))
  t=${faults[i]} faults[i]=${faults[j]} faults[j]=$t
done
slots=$((last / every))
elastic=()
[ "$shrink" = 1 ] && elastic=(--min-nproc 1)
start=$(now)
"$run" --nproc "$ranks" --max-restarts $((count + 2)) "${elastic[@]}" -- "$program" "${train_args[@]}" \
  --checkpoint-dir "$work/chaos" >"$work/chaos.log" 2>&1 &
supervisor=$!
recomputed=0 resumed=-1 injected=""
for k in $(seq 1 "$count"); do
  kind=${faults[k - 1]}
  # A checkpoint index in the k-th of count+1 equal parts of the run, past what this attempt resumed from.
  low=$(((k - 1) * slots / (count + 1) + 1)) high=$((k * slots / (count + 1)))
  [ "$high" -ge "$low" ] || high=$low
  target=$(((low + RANDOM % (high - low + 1)) * every))
  [ "$target" -gt "$resumed" ] || target=$((resumed + every))
  while [ "$(newest "$work/chaos")" -lt "$target" ]; do
    kill -0 "$supervisor" 2>/dev/null || fail "the run ended before fault $k (at step $target): see $work/chaos.log"
    sleep 0.02
  done
  sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  victim=$((RANDOM % ranks))
  pid=$(rank_pid "$supervisor" "$victim")
  [ -n "$pid" ] || fail "fault $k: no process of rank $victim"
  at=$(newest "$work/chaos")
  since=$(printf '%.2f' "$(echo "$(now) - $(stat -c %.6Y "$work/chaos/step-$at/manifest.txt")" | bc)")
  lost=$(awk -v s="$since" -v r="$rate" -v c="$every" 'BEGIN{n=s*r; if(n>c) n=c; printf "%d", n+0.5}')
  recomputed=$((recomputed + lost))
  case $kind in
    KILL | LOST) kill -KILL "$pid" ;;
    STOP) kill -STOP "$pid" ;;
  esac
  injected+="  fault $k: SIG${kind/LOST/KILL} to rank $victim (pid $pid) $(printf '%.1f' "$(echo "$(now) - $start" | bc)") s into the run, $since s after checkpoint step-$at (about $lost step(s) lost)"$'\n'
  # Wait for ptrain_run's restart, and the step it resumes from.
  while ! grep -q "^ptrain_run: restart $k of" "$work/chaos.log"; do
    kill -0 "$supervisor" 2>/dev/null || fail "ptrain_run ended after fault $k without restarting: see $work/chaos.log"
    sleep 0.02
  done
  resumed=$(grep "^ptrain_run: restart $k of" "$work/chaos.log" | sed -n 's/.*resuming from .*step-\([0-9]*\)$/\1/p')
  resumed=${resumed:--1}
  if [ "$kind" = LOST ]; then # the same rank fails again as soon as the restart starts
    until pid=$(rank_pid "$supervisor" "$victim") && [ -n "$pid" ]; do
      kill -0 "$supervisor" 2>/dev/null || fail "the run ended before the restart could be failed again"
      sleep 0.01
    done
    kill -KILL "$pid"
    injected+="  fault $k again: SIGKILL to rank $victim (pid $pid) of the restarted run, as it started"$'\n'
  fi
done
wait "$supervisor"
code=$?
chaos_seconds=$(printf '%.1f' "$(echo "$(now) - $start" | bc)")
[ "$code" -eq 0 ] || { cat "$work/chaos.log"; fail "the disturbed run exited $code"; }
restarts=$(sed -n 's/^ptrain_run: the run finished (exit code 0) after \([0-9]*\) restart(s).*/\1/p' "$work/chaos.log")
end=$(newest "$work/chaos")
echo "chaos_drill: seed $seed, faults injected: $count ($(echo "${faults[@]}" | tr ' ' ','))"
printf '%s' "$injected"
grep -E "^ptrain_run: (attempt [0-9]+ on [0-9]+ rank\(s\) failed|the restarted run failed again)" "$work/chaos.log" | sed 's/^/  /'
echo "chaos_drill: restarts: $restarts"
echo "chaos_drill: steps recomputed: about $recomputed (of $last; checkpoints every $every steps)"
echo "chaos_drill: time: $chaos_seconds s against $straight_seconds s undisturbed, overhead" \
  "$(echo "$chaos_seconds - $straight_seconds" | bc) s ($(awk -v a="$chaos_seconds" -v b="$straight_seconds" 'BEGIN{printf "%.0f", 100*(a-b)/b}')%)"
for step in $(sed -n 's/^ptrain_run: restart [0-9]* of .*resuming from .*step-\([0-9]*\)$/\1/p' "$work/chaos.log"); do
  grep -q "^Trainer: resuming from $work/chaos/step-$step " "$work/chaos.log" ||
    fail "ptrain_run restarted from step-$step, but no restarted run said 'Trainer: resuming from $work/chaos/step-$step'"
done
[ "$end" = "$last" ] || fail "the disturbed run's last checkpoint is step-$end, the undisturbed run's step-$last"
if [ "$shrink" = 0 ]; then
  same_weights "$work/straight/step-$last" "$work/chaos/step-$end" ||
    fail "the weights after the faults differ from the undisturbed run's ($work/chaos/step-$end against $work/straight/step-$last)"
  echo "chaos_drill: passed: the weights are the undisturbed run's, byte for byte"
else
  grep -q "continuing on $((ranks - 1))" "$work/chaos.log" || fail "ptrain_run did not continue on $((ranks - 1)) rank(s)"
  accuracy() { sed -n 's/^final test accuracy \([0-9.]*\)%$/\1/p' "$1" | tail -n 1; }
  python3 - "$work/straight/step-$last" "$work/chaos/step-$end" "$(accuracy "$work/straight.log")" \
    "$(accuracy "$work/chaos.log")" <<'EOF' || fail "the shrunk run is outside the tolerance"
import array, glob, json, os, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    for name, t in header.items():
        if name == "__metadata__": continue
        assert t["dtype"] == "F32", f"{path}: {name} is {t['dtype']}, the drill compares F32"
        a, b = t["data_offsets"]
        yield name, array.array("f", data[a:b])
straight, chaos, acc_straight, acc_chaos = sys.argv[1:]
squares = norm = diff = 0.0
for f in sorted(glob.glob(os.path.join(straight, "model*.safetensors"))):
    other = dict(tensors(os.path.join(chaos, os.path.basename(f))))
    for name, values in tensors(f):
        for x, y in zip(values, other[name]):
            squares += (x - y) ** 2
            norm += x * x
            diff = max(diff, abs(x - y))
relative = (squares / norm) ** 0.5
gap = abs(float(acc_straight) - float(acc_chaos))
print(f"chaos_drill: shrunk run: final test accuracy {acc_chaos}% against {acc_straight}% (tolerance 3 points); "
      f"the weights' L2 difference {relative:.3f} of their norm (tolerance 0.5), largest difference {diff:.3g}")
sys.exit(0 if gap <= 3 and relative < 0.5 else 1)
EOF
  echo "chaos_drill: passed: the run continued on $((ranks - 1)) rank(s) within the tolerance"
fi
rm -rf "$work"
