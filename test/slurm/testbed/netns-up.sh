#!/usr/bin/env bash
# N fake "hosts": network namespaces mpins$i (10.77.0.$((i+1)), one interface named mpi0), joined
# by bridge br-mpi (10.77.0.254) in the root namespace. Idempotent. From ../shared/testbed/.
set -e
N=${N:-2}
ip link show br-mpi >/dev/null 2>&1 || ip link add br-mpi type bridge
ip addr show dev br-mpi | grep -q 10.77.0.254/24 || ip addr add 10.77.0.254/24 dev br-mpi
ip link set br-mpi up
for i in $(seq 0 $((N - 1))); do
  ip netns list | grep -qw "mpins$i" && continue
  ip netns add "mpins$i"
  ip link add "vh$i" type veth peer name "vn$i"
  ip link set "vh$i" master br-mpi up
  ip link set "vn$i" netns "mpins$i"
  ip -n "mpins$i" link set "vn$i" name mpi0
  ip -n "mpins$i" addr add "10.77.0.$((i + 1))/24" dev mpi0
  ip -n "mpins$i" link set mpi0 up
  ip -n "mpins$i" link set lo up
done
