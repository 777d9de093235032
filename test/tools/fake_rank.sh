#!/bin/sh
# fake_rank.sh LOG MODE [PARAM] [--checkpoint-dir DIR] [--resume]: a stand-in for a training program,
# one process per rank, for ptrain_run's tests (ptrain_run_test.sh). Each rank appends
# "rank R of N: ARGS" to LOG, then by MODE:
#   fail CODE       every rank exits CODE, having saved nothing (a program that fails before its
#                   first checkpoint)
#   progress UNTIL  rank 0 saves DIR/step-K (K: the attempts so far, 1 first); the last rank waits
#                   for it, then exits 3 while K < UNTIL; the others exit 0
#   kill R          rank R kills itself with SIGKILL; the others sleep, to be ended
#   exit_one CODE   the last rank exits CODE; the others sleep, which mpiexec lets them do
#   lost_host       on more than one rank: rank 0 saves DIR/step-1 on the first attempt only, the
#                   last rank exits 3 after it (a host lost for good), the others 0; on one rank, exits 0
log=$1 mode=$2 param=${3:-}
shift 2
rank=${PMI_RANK:-0} size=${PMI_SIZE:-1}
echo "rank $rank of $size: $*" >>"$log"
dir=${FAKE_CHECKPOINT_DIR:-}  # for a DIR given to ptrain_run, not in ARGS
while [ $# -gt 0 ]; do
  case $1 in --checkpoint-dir) dir=$2 ;; --checkpoint-dir=*) dir=${1#--checkpoint-dir=} ;; esac
  shift
done
attempts=$(grep -c "^rank $rank of" "$log")  # this one included
last=$((size - 1))
save() { mkdir -p "$dir/step-$1" && echo "step $1" >"$dir/step-$1/manifest.txt"; }
wait_for() { for _ in $(seq 1 200); do [ -f "$1" ] && return 0; sleep 0.05; done; return 1; }
case $mode in
  fail) exit "$param" ;;
  progress)
    [ "$rank" = 0 ] && save "$attempts"
    if [ "$attempts" -lt "$param" ]; then
      if [ "$rank" = "$last" ]; then
        wait_for "$dir/step-$attempts/manifest.txt"
        exit 3
      fi
    fi
    exit 0 ;;
  exit_one)
    [ "$rank" = "$last" ] && exit "$param"
    sleep 30 ;;
  kill)
    [ "$rank" = "$param" ] && kill -9 $$
    sleep 30 ;;
  lost_host)
    [ "$size" = 1 ] && exit 0
    if [ "$attempts" = 1 ]; then
      [ "$rank" = 0 ] && save 1
      wait_for "$dir/step-1/manifest.txt"
    fi
    [ "$rank" = "$last" ] && exit 3
    exit 0 ;;
esac
