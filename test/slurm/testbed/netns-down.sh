#!/usr/bin/env bash
# Removes what netns-up.sh made. From ../shared/testbed/.
N=${N:-2}
for i in $(seq 0 $((N - 1))); do
  ip netns del "mpins$i" 2>/dev/null
  ip link del "vh$i" 2>/dev/null
done
ip link del br-mpi 2>/dev/null
true
