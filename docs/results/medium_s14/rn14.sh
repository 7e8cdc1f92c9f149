#!/bin/bash
# Item 2 A/B: ResNet-50 step (np2), libkolo "joined" (main: runs of any length) vs "cap" (runs
# joined only below 1 MiB, so no joined copy reaches memcpy), order from ORDER (ABBA across calls).
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=/work/h3/build/bench/kolo-bench-allreduce
uptime
for v in ${ORDER:-joined cap}; do
  export LD_LIBRARY_PATH=/tmp/h3s14/$v
  echo "== $v"; timeout 80 $M -np 2 $B --workload resnet50 --iters 20 | grep -v '^#' | grep -E "kolo|MPI"
done
uptime
