#!/bin/bash
# h3 s14: ResNet-50 step (np2), libkolo before (base) / after (new) 5f0ec72, the sum kernel's loads inlined.
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=/work/h3/build/bench/kolo-bench-allreduce
uptime
for v in ${ORDER:-base new}; do
  export LD_LIBRARY_PATH=/tmp/h3s14/kern-$v
  echo "== $v"; timeout 80 $M -np 2 $B --workload resnet50 --iters 20 | grep -v '^#' | grep -E "kolo|MPI"
done
uptime
