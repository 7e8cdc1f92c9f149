#!/bin/bash
# Issue 29: ResNet-50 gradient step only (the one figure ab.sh left open), np=2, ABBA blocks
# (PAIRS, default 4), base c45edbe vs split, each side its own binary and libkolo.
M="timeout 180 mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -np 2"
uptime
for rep in $(seq ${PAIRS:-4}); do
  for v in base new new base; do
    if [ $v = base ]; then D=/work/h-split-base/build; else D=/work/h-split/build; fi
    export LD_LIBRARY_PATH=$D
    echo "== $v block $rep resnet50"; $M $D/bench/kolo-bench-allreduce --workload resnet50 --iters ${ITERS_RESNET:-10} | grep -E "kolo|MPI"
  done
done
uptime
