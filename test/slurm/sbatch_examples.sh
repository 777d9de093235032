#!/usr/bin/env bash
# The batch scripts of examples/slurm submitted to the testbed's real Slurm, waited for, and their
# results checked:
#   sbatch_examples.sh retinopathy single|two_hosts EXAMPLES DATA [PRELOAD]
#       retinopathy.sbatch on 1 node (single) or 2 nodes (two_hosts): the job must end COMPLETED,
#       one rank per node on distinct hosts, print the confusion matrix and write a one-epoch CSV.
#   sbatch_examples.sh unet_scaling two_hosts EXAMPLES DATA [PRELOAD]
#       unet_scaling.sh --wait 1 2: a job per node count, each reaching a validation IoU of 0.5
#       (the example's --min-iou), with its CSV, and the loop's summary line per node count.
# EXAMPLES: the built examples; DATA: make_example_data's tree; PRELOAD: ucx_finalize_workaround
# for two_hosts runs (see README.md). Exit 77 when not root, 1 on any failure.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
. "$HERE/harness.sh"
need_root

script=${1:-} testbed=${2:-} examples=${3:-} data=${4:-} preload=${5:-}
case $script/$testbed in
  retinopathy/single | retinopathy/two_hosts | unet_scaling/two_hosts) ;;
  *) echo "usage: $0 retinopathy single|two_hosts | unet_scaling two_hosts  EXAMPLES DATA [PRELOAD]" >&2; exit 2 ;;
esac
[ -d "$examples" ] && [ -d "$data" ] || { echo "FAILED: no examples directory '$examples' or data '$data'"; exit 1; }
R=$(testbed_root "$testbed")
testbed_start "$testbed" || { echo "FAILED: the Slurm testbed '$testbed' did not start"; exit 1; }

work=$(mktemp -d /tmp/ptrain-sbatch-examples.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
export PTRAIN_EXAMPLES=$examples RESULTS=$work/results PTRAIN_NUM_THREADS=1
# Each rank says where it ran (task_wrapper.sh); across the namespace hosts MPI goes over TCP.
export PTRAIN_RANK_WRAPPER=$HERE/task_wrapper.sh
if [ "$testbed" = two_hosts ]; then
  export UCX_TLS=tcp
  [ -z "$preload" ] || export PTRAIN_SLURM_TASK_PRELOAD=$preload
fi
limit=300
problems=()

# check_ranks FILE N: N 'slurm-task:' lines from N distinct hosts.
check_ranks() {
  local ranks hosts
  ranks=$(grep -c '^slurm-task: ' "$1" || true)
  hosts=$(sed -n 's/^slurm-task: .* host=\([^ ]*\) .*/\1/p' "$1" | sort -u | wc -l)
  [ "$ranks" = "$2" ] && [ "$hosts" = "$2" ] || problems+=("$(basename "$1"): $ranks rank(s) on $hosts host(s), expected $2 on $2")
}
# check_csv FILE EPOCHS: a header and EPOCHS lines.
check_csv() {
  local lines
  lines=$(wc -l <"$1" 2>/dev/null || echo 0)
  [ "$lines" = $(($2 + 1)) ] || problems+=("$1: $lines line(s), expected a header and $2 epoch line(s)")
}

start=$SECONDS
case $script in
  retinopathy)
    nodes=1
    [ "$testbed" = two_hosts ] && nodes=2
    export RETINA_DATA=$data/retina RETINA_ARGS="--image-size 80 --batch 4 --epochs 1"
    echo "== sbatch --wait --nodes=$nodes examples/slurm/retinopathy.sbatch"
    timeout -k 10 $limit sbatch --wait --parsable --nodes=$nodes "$REPO/examples/slurm/retinopathy.sbatch" >sbatch.out 2>&1
    rc=$?
    job=$(grep -oE '^[0-9]+' sbatch.out | head -n 1 || true)
    [ $rc -ge 124 ] && [ -n "$job" ] && scancel "$job" 2>/dev/null
    cat sbatch.out
    out=retinopathy-$job.out
    echo "-- job output ($out)"
    cat "$out" 2>/dev/null || problems+=("the job wrote no output file $out")
    [ $rc = 0 ] || problems+=("sbatch --wait exited with status $rc (124: not done within $limit s)")
    grep -q "confusion matrix" "$out" 2>/dev/null || problems+=("no confusion matrix in $out")
    check_ranks "$out" $nodes
    check_csv "$RESULTS/retinopathy_${nodes}nodes_$job.csv" 1
    ;;
  unet_scaling)
    export UNET_DATA=$data/cells
    export UNET_ARGS="--image-size 64 --levels 3 --base-width 8 --batch 2 --epochs 20 --lr 0.005 --warmup-steps 4 --min-iou 0.5"
    echo "== examples/slurm/unet_scaling.sh --wait 1 2"
    timeout -k 10 $limit "$REPO/examples/slurm/unet_scaling.sh" --wait 1 2 >summary.txt 2>&1
    rc=$?
    [ $rc -ge 124 ] && for name in ptrain-unet-1n ptrain-unet-2n; do scancel --name="$name" 2>/dev/null; done
    [ $rc = 0 ] || problems+=("unet_scaling.sh --wait exited with status $rc (124: not done within $limit s)")
    for nodes in 1 2; do
      job=$(cut -d';' -f1 "$RESULTS/unet_${nodes}nodes.submitted" 2>/dev/null)
      out=$RESULTS/unet_${nodes}nodes_$job.out
      echo "-- job output, $nodes node(s) ($out)"
      cat "$out" 2>/dev/null || problems+=("no output file for the $nodes-node job")
      grep -q "^final validation IoU" "$out" 2>/dev/null || problems+=("the $nodes-node job printed no final IoU")
      check_ranks "$out" $nodes
      check_csv "$RESULTS/unet_${nodes}nodes_$job.csv" 20
      awk -v n="$nodes" -v j="$job" '$1 == n && $2 == j && $3 == "COMPLETED" && $4 >= 0.5 { ok = 1 } END { exit !ok }' summary.txt ||
        problems+=("the summary has no line '$nodes $job COMPLETED <IoU of at least 0.5>'")
    done
    echo "-- unet_scaling.sh's summary"
    cat summary.txt
    ;;
esac

if [ ${#problems[@]} -ne 0 ]; then
  printf 'FAILED: %s\n' "${problems[@]}"
  dump_logs "$R" 2>&1
  exit 1
fi
echo "PASSED: examples/slurm $script on the $testbed testbed in $((SECONDS - start))s"
