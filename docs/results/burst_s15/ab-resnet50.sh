#!/bin/bash
# h2 s15: --workload resnet50 at np=2, base vs new libkolo (LD_LIBRARY_PATH) in ABBA blocks
# (PAIRS, default 2); kolo beside MPI in every run.
M="timeout 120 mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=/work/h2/build/bench/kolo-bench-allreduce
uptime
for rep in $(seq ${PAIRS:-2}); do
  for v in base new new base; do
    if [ $v = base ]; then export LD_LIBRARY_PATH=$BASE; else export LD_LIBRARY_PATH=$NEW; fi
    echo "== $v block $rep resnet50"; $M -np 2 $B --workload resnet50 --iters ${ITERS:-10} | grep -E "kolo|MPI"
  done
done
uptime
