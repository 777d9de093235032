#!/bin/sh
# The scaling model (bench/scaling_model.cpp): fits latency and bandwidth per collective under
# mpiexec -n 2, 3 and 4 over shared memory, times data-parallel steps at 1 to 4 ranks, fits the
# same collectives between two network-namespace "hosts" over TCP when it can start them
# (../shared/testbed/netns-up.sh, or PTRAIN_TESTBED; as root; PTRAIN_SCALING_TCP=0 skips it), then prints the model's
# error on the measured 2-4 rank steps, its predictions at 8 to 1,024 A100s and the published
# figures beside the model on the publications' hardware.
# Usage: bench/run_scaling_model.sh [BUILD_DIR] (holds bench/bench_scaling_model; default: build).
# PTRAIN_BENCH_STEPS passes through; PTRAIN_NUM_THREADS defaults to 1 (one thread a rank).
set -eu
build=${1:-build}
bin="$build/bench/bench_scaling_model"
[ -x "$bin" ] || { echo "run_scaling_model.sh: no $bin (build the bench_scaling_model target)" >&2; exit 1; }
export PTRAIN_NUM_THREADS="${PTRAIN_NUM_THREADS:-1}" OMP_NUM_THREADS=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "bench=load uptime=\"$(uptime)\""
for n in 1 2 3 4; do
  timeout 600 mpiexec -n "$n" "$bin" measure shm | tee -a "$out"
done

# Two hosts over TCP: hydra starts one rank in each namespace through netns-rsh; UCX_TLS=tcp keeps
# UCX from finding shared memory between them (testbed README).
testbed=${PTRAIN_TESTBED:-$(cd "$(dirname "$0")/../.." && pwd)/shared/testbed}  # beside the checkout
if [ "${PTRAIN_SCALING_TCP:-1}" != 0 ] && [ -x "$testbed/netns-up.sh" ] && [ "$(id -u)" = 0 ]; then
  created=0
  ip netns list | grep -qw mpins0 || created=1
  if bash "$testbed/netns-up.sh" >/dev/null 2>&1; then
    abs=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
    # The lines come out first; the two ranks were seen not to exit over the namespaces once, so a
    # short timeout ends them.
    UCX_TLS=tcp timeout 120 mpiexec -launcher ssh -launcher-exec "$testbed/netns-rsh" -iface br-mpi \
      -hosts 10.77.0.1,10.77.0.2 -genv UCX_TLS tcp -genv PTRAIN_NUM_THREADS 1 -n 2 "$abs" measure tcp | tee -a "$out" ||
      echo "bench=scaling_tcp status=ended_by_timeout_or_failed (its fit lines above, if any, stand)"
  else
    echo "bench=scaling_tcp status=skipped (netns-up.sh failed)"
  fi
  [ "$created" = 1 ] && bash "$testbed/netns-down.sh" >/dev/null 2>&1 || true
else
  echo "bench=scaling_tcp status=skipped (PTRAIN_SCALING_TCP=0, no testbed at $testbed, or not root)"
fi
echo "bench=load uptime=\"$(uptime)\""

"$bin" predict "$out"
