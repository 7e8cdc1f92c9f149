#!/bin/bash
# h2 s13: must-not-regress, base (main c459fbb libkolo) vs new, alternated: ResNet-50 step (np2) and, with BIG=1, 64 MB
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=/work/h2/build/bench/kolo-bench-allreduce
uptime
for rep in $(seq ${REPS:-2}); do
  for v in ${ORDER:-base new}; do
    if [ $v = base ]; then export LD_LIBRARY_PATH=${BASE:-/tmp/h2-base13}; else export LD_LIBRARY_PATH=${NEW:-/tmp/h2-new13}; fi
    if [ -n "$BIG" ]; then echo "== $v rep $rep 64M"; timeout 60 $M -np 2 $B --min-bytes 64M --max-bytes 64M | grep -v '^#' | awk '{print $1, $4, $9, $14, $15}'; fi
    if [ -z "$NORESNET" ]; then echo "== $v rep $rep resnet50"; timeout 80 $M -np 2 $B --workload resnet50 --iters 20 | grep -v '^#' | grep -E "kolo|MPI"; fi
  done
done
uptime
