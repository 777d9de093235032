#!/usr/bin/env bash
# sample_cpu.sh PATTERN COMMAND...: runs COMMAND and, from 2.5 s to 3.5 s after its start, samples
# the CPU time of each process whose command line starts with PATTERN: one line
# "cpu ticks <user+system ticks in that second> <state>" per process on stderr (100 ticks = a
# core). Exits with COMMAND's status.
pattern=$1
shift
"$@" &
launch=$!
ticks() { awk '{ print $14 + $15, $3 }' "/proc/$1/stat" 2>/dev/null; }
sleep 2.5
pids=$(pgrep -f "^$pattern")
declare -A before
for p in $pids; do before[$p]=$(ticks "$p"); done
sleep 1
for p in $pids; do
  now=$(ticks "$p")
  [ -n "$now" ] && [ -n "${before[$p]}" ] && echo "cpu ticks $((${now% *} - ${before[$p]% *})) ${now#* }" >&2
done
wait $launch
