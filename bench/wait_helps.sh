#!/bin/bash
# KOLO_WAIT_HELPS=1 beside =0 (docs/runtime.md, "The waiter runs the pass"), interleaved in
# the same minutes, kolo beside MPI in every table: np=2 sweep to 64 MB (twice per run),
# np=4 sweep to 1 MB, the ResNet-50 and tiny workloads at np=2. Summary of all runs:
#   bench/wait_helps.sh BUILD OUT RUNS    (~2 min per run on 2 loaded cores)
#   /usr/bin/python3 bench/wait_helps_summary.py OUT/run-*.txt
set -euo pipefail
build=${1:-build}; out=${2:-wait_helps_out}; runs=${3:-4}
B=$build/bench/kolo-bench-allreduce
M="mpirun --oversubscribe --allow-run-as-root"
mkdir -p "$out"
for run in $(seq 1 "$runs"); do
  {
    for rep in 1 2; do
      for h in 1 0; do
        uptime; echo "== rep $rep np2 sweep KOLO_WAIT_HELPS=$h"
        KOLO_WAIT_HELPS=$h $M -np 2 -x KOLO_WAIT_HELPS "$B" --max-bytes 64M
      done
    done
    for h in 1 0; do
      uptime; echo "== np4 sweep to 1M KOLO_WAIT_HELPS=$h"
      KOLO_WAIT_HELPS=$h $M -np 4 -x KOLO_WAIT_HELPS "$B" --max-bytes 1M
    done
    for w in resnet50 tiny; do
      for h in 1 0; do
        uptime; echo "== np2 workload $w KOLO_WAIT_HELPS=$h"
        KOLO_WAIT_HELPS=$h $M -np 2 -x KOLO_WAIT_HELPS "$B" --workload $w
      done
    done
    uptime
  } > "$out/run-$run.txt" 2>&1
done
