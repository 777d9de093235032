#!/bin/bash
# The UNet scaling loop, as the UNet project's submission.sh: one job of unet.sbatch per node
# count, each writing results/unet_<N>nodes_<job>.csv.
#   examples/slurm/unet_scaling.sh [--wait] [NODE_COUNT...]      (default node counts: 1 2 4 8)
# Without --wait it prints the job ids and returns. With --wait it waits for every job, prints
# per node count the job, its state, the last epoch's validation IoU of the foreground, the
# training images per second, and the speed-up and scaling efficiency (speed-up over the node
# ratio) against the smallest node count that reported a rate, and exits non-zero if a job failed. sbatch options (a partition,
# an account, a time limit) go in SBATCH_* variables, e.g. SBATCH_PARTITION=gpu.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
wait_for_jobs=""
if [ "${1:-}" = "--wait" ]; then
  wait_for_jobs=1
  shift
fi
node_counts=("$@")
[ ${#node_counts[@]} -gt 0 ] || node_counts=(1 2 4 8)
results=${RESULTS:-results}
mkdir -p "$results"
export RESULTS=$results

pids=() ids=()
for nodes in "${node_counts[@]}"; do
  [[ $nodes =~ ^[1-9][0-9]*$ ]] || { echo "unet_scaling.sh: '$nodes' is not a node count" >&2; exit 2; }
  submitted=$results/unet_${nodes}nodes.submitted
  if [ -n "$wait_for_jobs" ]; then
    sbatch --wait --parsable --nodes="$nodes" --job-name="ptrain-unet-${nodes}n" \
      --output="$results/unet_${nodes}nodes_%j.out" "$here/unet.sbatch" >"$submitted" &
    pids+=($!)
  else
    sbatch --parsable --nodes="$nodes" --job-name="ptrain-unet-${nodes}n" \
      --output="$results/unet_${nodes}nodes_%j.out" "$here/unet.sbatch" >"$submitted"
    ids+=("$(cut -d';' -f1 "$submitted")")
    echo "unet_scaling: $nodes node(s): job ${ids[-1]}"
  fi
done
[ -n "$wait_for_jobs" ] || exit 0

failed=0
rows=()
base_nodes="" base_rate=""
number='^[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$'
for i in "${!node_counts[@]}"; do
  nodes=${node_counts[$i]}
  state=COMPLETED
  wait "${pids[$i]}" || { state=FAILED; failed=1; }
  job=$(cut -d';' -f1 "$results/unet_${nodes}nodes.submitted")
  csv=$results/unet_${nodes}nodes_${job}.csv
  metrics="- -"
  if [ -s "$csv" ]; then
    metrics=$(awk -F, 'NR == 1 { for (c = 1; c <= NF; ++c) col[$c] = c; next }
                       { last = $col["val_iou_1"] " " $col["images_per_second"] } END { print last }' "$csv")
  elif [ "$state" = COMPLETED ]; then
    state=NO_LOG
    failed=1
  fi
  read -r iou rate <<<"$metrics"
  rows+=("$nodes ${job:--} $state $iou $rate")
  if [[ $rate =~ $number ]] && { [ -z "$base_nodes" ] || [ "$nodes" -lt "$base_nodes" ]; }; then
    base_nodes=$nodes base_rate=$rate
  fi
done
printf '%-6s %-8s %-10s %-8s %-10s %-8s %s\n' nodes job state val_IoU images/s speed-up efficiency
for row in "${rows[@]}"; do
  read -r nodes job state iou rate <<<"$row"
  scaling="- -"
  if [ -n "$base_nodes" ] && [[ $rate =~ $number ]]; then
    scaling=$(awk -v r="$rate" -v b="$base_rate" -v n="$nodes" -v bn="$base_nodes" \
              'BEGIN { s = b > 0 ? r / b : 0; printf "%.2f %.0f%%", s, 100 * s * bn / n }')
  fi
  read -r speedup efficiency <<<"$scaling"
  printf '%-6s %-8s %-10s %-8s %-10s %-8s %s\n' "$nodes" "$job" "$state" "$iou" "$rate" "$speedup" "$efficiency"
done
exit $failed
