#!/usr/bin/env bash
# ctest fixture for the slurm/ entries: starts (idempotently) or stops a Slurm testbed.
# Usage: slurm_fixture.sh start|stop single|two_hosts
# single: one node (this machine) under /tmp/slurmci; two_hosts: two nodes in network namespaces
# (node0 10.77.0.1, node1 10.77.0.2) under /tmp/slurmci-mn. Exit 77 (skipped) when not root.
set -uo pipefail
. "$(dirname "$0")/harness.sh"
need_root
case ${1:-}/${2:-} in
  start/single | start/two_hosts) testbed_start "$2" ;;
  stop/single | stop/two_hosts) testbed_stop "$2" ;;
  *) echo "usage: $0 start|stop single|two_hosts" >&2; exit 2 ;;
esac
