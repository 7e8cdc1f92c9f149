#!/bin/bash
# h2 s12: must-not-regress, base (main 80f137b libkolo) vs new, alternated: 64 MB and the ResNet-50 step (np2)
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=/work/h2/build/bench/kolo-bench-allreduce
uptime
for rep in $(seq ${REPS:-2}); do
  for v in base new; do
    if [ $v = base ]; then export LD_LIBRARY_PATH=/tmp/h2-base; else export LD_LIBRARY_PATH=/tmp/h2-new; fi
    echo "== $v rep $rep 64M"; timeout 60 $M -np 2 $B --min-bytes 64M --max-bytes 64M | grep -v '^#' | awk '{print $1, $4, $9, $14}'
    echo "== $v rep $rep resnet50"; timeout 80 $M -np 2 $B --workload resnet50 --iters 20 | grep -v '^#'
  done
done
uptime
