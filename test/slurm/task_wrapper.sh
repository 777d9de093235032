#!/bin/sh
# Run by the launcher in front of each rank of a slurm/ test: says where the rank runs (the
# scripts count the distinct hosts and IPs of a two_hosts run from these lines), then becomes it.
ip=$(ip -4 -o addr show scope global up 2>/dev/null | awk '{ sub("/.*", "", $4); print $4; exit }')
echo "slurm-task: rank=${PMI_RANK:-${SLURM_PROCID:-?}} host=$(hostname) ip=${ip:-none}"
# For the rank only, not for the launcher: see ucx_finalize_workaround.cpp.
[ -z "${PTRAIN_SLURM_TASK_PRELOAD:-}" ] || export LD_PRELOAD="$PTRAIN_SLURM_TASK_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}"
exec "$@"
