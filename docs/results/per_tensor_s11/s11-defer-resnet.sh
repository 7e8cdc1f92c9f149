#!/bin/bash
# h2 s11: KOLO_BURST_DEFER=$1 then $2, ResNet-50 gradient step (workload resnet50) np2, beside MPI.
cd /work/h2
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x KOLO_BURST_DEFER"
for d in "$@"; do
  uptime; echo "== np2 resnet50 KOLO_BURST_DEFER=$d"
  KOLO_BURST_DEFER=$d timeout 80 $M -np 2 build/bench/kolo-bench-allreduce --workload resnet50 --iters 20 | grep -v '^#'
done
uptime
