#!/bin/bash
# Runtime (kolo-bench-allreduce, buffer rewritten per call) beside the engine alone (--fill), same quiet run.
cd /work/h3
M="mpirun -np 2 --oversubscribe --allow-run-as-root"
uptime
for r in 1 2; do
  echo "== rep $r runtime"
  $M build/bench/kolo-bench-allreduce --min-bytes 16K --max-bytes 1M --factor 4 --iters 300 | grep -vE "^$"
  echo "== rep $r engine --fill"
  $M build/bench/kolo-bench-shm-allreduce --case sweep --max-bytes 1048576 --iters 300 --fill | grep -E "sweep" | grep -E " (16384|65536|262144|1048576) "
done
uptime
