#!/usr/bin/env bash
# A single-node Slurm "cluster" (munged + slurmctld + slurmd), all state under $SLURMCI_ROOT.
# Idempotent: with our daemons alive it only waits for the node to be idle. Needs root.
# Adapted from ../shared/testbed/start-slurm.sh.
# Usage: bash start-slurm.sh; export SLURM_CONF=/tmp/slurmci/slurm.conf; srun --mpi=pmi2 -n 2 ./app
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
R=${SLURMCI_ROOT:-/tmp/slurmci}
NODE=$(hostname -s)
NCPU=${SLURMCI_CPUS:-$(nproc)}
CTLD_PORT=${SLURMCI_CTLD_PORT:-6817}
D_PORT=${SLURMCI_D_PORT:-6818}

install_slurm
fresh_state "$R"
start_munge "$R" || { dump_logs "$R"; exit 1; }
MEM=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')

cat >"$R/slurm.conf.new" <<CONF
ClusterName=ci
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$R/munge/munge.socket.2
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$D_PORT
StateSaveLocation=$R/state
SlurmdSpoolDir=$R/spool
SlurmctldPidFile=$R/run/slurmctld.pid.self
SlurmdPidFile=$R/run/slurmd.pid.self
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdLogFile=$R/log/slurmd.log
PlugStackConfig=$R/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
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
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$NCPU RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
: >"$R/plugstack.conf"
mv "$R/slurm.conf.new" "$R/slurm.conf"
export SLURM_CONF="$R/slurm.conf"

# -D: foreground, backgrounded here so that the PIDs we save are the daemons' own.
if ! alive "$R/run/slurmctld.pid"; then
  need_free_port "$R" slurmctld "$CTLD_PORT"
  setsid slurmctld -D -i -f "$SLURM_CONF" >>"$R/log/slurmctld.out" 2>&1 </dev/null &
  echo $! >"$R/run/slurmctld.pid"
fi
if ! alive "$R/run/slurmd.pid"; then
  need_free_port "$R" slurmd "$D_PORT"
  setsid slurmd -D -f "$SLURM_CONF" -N "$NODE" >>"$R/log/slurmd.out" 2>&1 </dev/null &
  echo $! >"$R/run/slurmd.pid"
fi
wait_idle "$R" 1 "${SLURMCI_START_LIMIT:-60}"
