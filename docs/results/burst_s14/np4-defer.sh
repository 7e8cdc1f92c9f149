#!/bin/bash
# h2 s14 task 2: the np=4 burst (--workload tiny --iters 40) with KOLO_BURST_DEFER=0 and =1,
# ABBA blocks in one quiet run (BLOCKS, default 3); main's build, kolo beside MPI in every run.
cd /work/h2
M="timeout 120 mpirun --oversubscribe --allow-run-as-root --bind-to none -x KOLO_BURST_DEFER"
B=build/bench/kolo-bench-allreduce
uptime
for rep in $(seq ${BLOCKS:-3}); do
  for d in 0 1 1 0; do
    export KOLO_BURST_DEFER=$d
    echo "== block $rep defer=$d"; $M -np 4 $B --workload tiny --iters 40 | grep -E "one buffer|kolo,"
  done
done
uptime
