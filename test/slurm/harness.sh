# Sourced by slurm_fixture.sh and slurm_run.sh: the testbed names, the root check and the lease
# that keeps two concurrent ctest runs (two build dirs) off each other's Slurm daemons.
TESTBED=$(cd "$(dirname "${BASH_SOURCE[0]}")/testbed" && pwd)
SKIP=77 # SKIP_RETURN_CODE of every slurm/ ctest entry
. "$TESTBED/lib.sh"

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "NOT RUN: the Slurm and multi-host tests need root (network namespaces, daemons)"
    exit $SKIP
  fi
}

# testbed_root single|two_hosts: where that testbed keeps its state (and its slurm.conf).
testbed_root() {
  case $1 in
    single) echo "${PTRAIN_SLURM_SINGLE_ROOT:-/tmp/slurmci}" ;;
    two_hosts) echo "${PTRAIN_SLURM_MULTI_ROOT:-/tmp/slurmci-mn}" ;;
    *) echo "unknown testbed '$1' (expected single or two_hosts)" >&2; return 1 ;;
  esac
}

# The lease on a testbed belongs to one ctest run (the one that runs its fixture and tests): the
# start in another ctest run waits until the holder stops the testbed or ends. A lease whose
# holder is gone is taken over. Scripts run by hand take no lease (a lease held by a long-lived
# shell would block every later ctest run), but they too wait while a ctest run holds one.
lease_owner=${PTRAIN_SLURM_OWNER:-}
if [ -z "$lease_owner" ] && [ "$(cat "/proc/$PPID/comm" 2>/dev/null)" = ctest ]; then
  lease_owner=$PPID
fi
lease_take() {
  local R=$1 limit=${PTRAIN_SLURM_LEASE_WAIT:-240} start=$SECONDS holder said=""
  while :; do
    exec 8>"$R.lock"
    flock 8
    holder=$(cat "$R.lease" 2>/dev/null || true)
    if [ -z "$holder" ] || [ "$holder" = "$lease_owner" ] || ! kill -0 "$holder" 2>/dev/null; then
      if [ -n "$lease_owner" ]; then echo "$lease_owner" >"$R.lease"; else rm -f "$R.lease"; fi
      flock -u 8
      return 0
    fi
    flock -u 8
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "the Slurm testbed $R is still held after $limit s by process $holder: $(ps -o args= -p "$holder" 2>/dev/null)" >&2
      return 1
    fi
    [ -n "$said" ] || { echo "waiting for process $holder ($(ps -o args= -p "$holder" 2>/dev/null)) to release $R"; said=1; }
    sleep 1
  done
}
lease_give_back() {
  local R=$1
  [ -n "$lease_owner" ] || return 0
  exec 8>"$R.lock"
  flock 8
  [ "$(cat "$R.lease" 2>/dev/null || true)" = "$lease_owner" ] && rm -f "$R.lease"
  flock -u 8
  return 0
}

# testbed_start single|two_hosts: idempotent; exports SLURM_CONF.
testbed_start() {
  local R
  R=$(testbed_root "$1") || return 1
  lease_take "$R" || return 1
  if [ "$1" = single ]; then
    SLURMCI_ROOT=$R bash "$TESTBED/start-slurm.sh" || return 1
  else
    SLURMCI_ROOT=$R N=2 bash "$TESTBED/start-slurm-multinode.sh" || return 1
  fi
  export SLURM_CONF=$R/slurm.conf
}

# testbed_stop single|two_hosts: the daemons, and for two_hosts the namespaces and the bridge.
testbed_stop() {
  local R status=0
  R=$(testbed_root "$1") || return 1
  lease_take "$R" || return 1
  SLURMCI_ROOT=$R bash "$TESTBED/stop-slurm.sh" || status=1
  if [ "$1" = two_hosts ]; then
    N=2 bash "$TESTBED/netns-down.sh"
    if ip netns list | grep -qE '^mpins[01]\b' || ip link show br-mpi >/dev/null 2>&1; then
      echo "could not remove the network namespaces mpins0/mpins1 or the bridge br-mpi" >&2
      status=1
    fi
  fi
  lease_give_back "$R"
  return $status
}
