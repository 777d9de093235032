#!/usr/bin/env bash
# N-node Slurm on one machine: slurmctld in the root network namespace (10.77.0.254 on bridge
# br-mpi), one slurmd per network namespace mpins$i (10.77.0.$((i+1)), host name node$i through
# a UTS namespace). Idempotent; PIDs saved under $R/run; stop with stop-slurm.sh.
# Adapted from ../shared/testbed/start-slurm-multinode.sh.
# Usage: N=2 bash start-slurm-multinode.sh; export SLURM_CONF=/tmp/slurmci-mn/slurm.conf
#        UCX_TLS=tcp srun --mpi=pmi2 -N 2 -n 2 ./app
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
export N=${N:-2}
R=${SLURMCI_ROOT:-/tmp/slurmci-mn}
CPUS=${SLURMCI_CPUS:-$(nproc)}       # per fake node (oversubscribes the real cores; fine for CI)
CTLD_PORT=${SLURMCI_CTLD_PORT:-6827} # differs from start-slurm.sh so that both can run at once

install_slurm
bash "$HERE/netns-up.sh"
fresh_state "$R"
start_munge "$R" || { dump_logs "$R"; exit 1; }

MEM=$(($(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p') / N))
{
  cat <<CONF
ClusterName=cimn
SlurmctldHost=$(hostname -s)(10.77.0.254)
AuthType=auth/munge
AuthInfo=socket=$R/munge/munge.socket.2
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=6818
StateSaveLocation=$R/state
SlurmdSpoolDir=$R/spool/%n
SlurmctldPidFile=$R/run/slurmctld.pid.self
SlurmdPidFile=$R/run/slurmd-%n.pid.self
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdLogFile=$R/log/slurmd-%n.log
PlugStackConfig=$R/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
# sbatch --wait polls every 2 s (not 2, 8, 32...) when MinJobAge <= 4, and a job queued behind
# a finishing one starts within a second, not at the next minute's scheduling pass.
MinJobAge=4
SlurmdDebug=${SLURMCI_DEBUG:-info}
SlurmctldDebug=${SLURMCI_DEBUG:-info}
SchedulerParameters=sched_interval=1,bf_interval=1
CONF
  for i in $(seq 0 $((N - 1))); do
    echo "NodeName=node$i NodeAddr=10.77.0.$((i + 1)) NodeHostname=node$i CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$R/slurm.conf.new"
mv "$R/slurm.conf.new" "$R/slurm.conf"
: >"$R/plugstack.conf"
export SLURM_CONF="$R/slurm.conf"

if ! alive "$R/run/slurmctld.pid"; then
  need_free_port "$R" slurmctld "$CTLD_PORT"
  setsid slurmctld -D -i -f "$SLURM_CONF" >>"$R/log/slurmctld.out" 2>&1 </dev/null &
  echo $! >"$R/run/slurmctld.pid"
fi
# Node names must resolve inside the fake nodes (hydra's mpiexec, rendezvous by name...): each
# slurmd's private mount namespace gets this file bind-mounted over /etc/hosts.
{
  cat /etc/hosts
  echo "10.77.0.254 $(hostname -s)-ctl"
  for i in $(seq 0 $((N - 1))); do echo "10.77.0.$((i + 1)) node$i"; done
} >"$R/hosts"
for i in $(seq 0 $((N - 1))); do
  mkdir -p "$R/spool/node$i" "$R/cg-node$i"
  alive "$R/run/slurmd-node$i.pid" && continue
  # The exec chain keeps the PID: nsenter -> unshare (no --fork) -> sh -> exec slurmd. A private
  # mount namespace with a fresh sysfs, so that /sys/class/net shows the namespace's own NICs (UCX
  # enumerates interfaces there), with the host's /sys/fs/cgroup moved back on top (slurmd 22.05
  # refuses to start without it: "Unable to initialize cgroup plugin").
  setsid nsenter --net="/run/netns/mpins$i" unshare --uts --mount --propagation private sh -c "
    set -e; hostname node$i
    mount --rbind /sys/fs/cgroup '$R/cg-node$i'
    umount -l /sys; mount -t sysfs sysfs /sys
    mount --move '$R/cg-node$i' /sys/fs/cgroup
    mount --bind '$R/hosts' /etc/hosts
    exec slurmd -D -N node$i -f '$SLURM_CONF'" \
    >>"$R/log/slurmd-node$i.out" 2>&1 </dev/null &
  echo $! >"$R/run/slurmd-node$i.pid"
done
wait_idle "$R" "$N" "${SLURMCI_START_LIMIT:-60}"
