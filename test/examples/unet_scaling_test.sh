#!/bin/bash
# examples/slurm/unet_scaling.sh --wait's summary without a Slurm: a stand-in sbatch on PATH "runs"
# each job by writing its CSV, at 100 images/s on 1 node, 180 on 2 and 300 on 4 (the 8-node job
# fails and writes none). The summary must give speed-ups 1.00, 1.80, 3.00 and efficiencies 100%,
# 90%, 75% against the 1-node run, and exit non-zero for the failed job.
#   unet_scaling_test.sh WORK_DIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$1
rm -rf "$work" && mkdir -p "$work/bin"
cat >"$work/bin/sbatch" <<'SBATCH'
#!/bin/bash
nodes="" output=""
for arg in "$@"; do
  case $arg in
    --nodes=*) nodes=${arg#--nodes=} ;;
    --output=*) output=${arg#--output=} ;;
  esac
done
job=$((1000 + nodes))
[ "$nodes" = 8 ] && { echo "$job"; exit 1; }
rate=$(case $nodes in 1) echo 100 ;; 2) echo 180 ;; 4) echo 300 ;; esac)
csv=${output%_%j.out}_$job.csv
printf 'epoch,val_iou_1,images_per_second\n1,0.40,%s\n2,0.61,%s\n' "$((rate - 5))" "$rate" >"$csv"
echo "$job"
SBATCH
chmod +x "$work/bin/sbatch"
cd "$work"
status=0
PATH=$work/bin:$PATH RESULTS=$work/results bash "$repo/examples/slurm/unet_scaling.sh" --wait 2 1 4 8 >summary.txt || status=$?
cat summary.txt
fail() { echo "unet_scaling_test: FAILED: $1" >&2; exit 1; }
[ "$status" = 1 ] || fail "exit status $status, expected 1 (the 8-node job failed)"
grep -Eq '^nodes +job +state +val_IoU +images/s +speed-up +efficiency$' summary.txt || fail "no header with speed-up and efficiency"
for expected in "2 1002 COMPLETED 0.61 180 1.80 90%" "1 1001 COMPLETED 0.61 100 1.00 100%" \
                "4 1004 COMPLETED 0.61 300 3.00 75%" "8 1008 FAILED - - - -"; do
  awk -v want="$expected" '{ $1 = $1 } $0 == want { found = 1 } END { exit !found }' summary.txt ||
    fail "no line '$expected'"
done
echo "unet_scaling_test: PASSED"
