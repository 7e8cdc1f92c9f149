#!/bin/bash
cd /work/h3
M="mpirun -np 2 --oversubscribe --allow-run-as-root"
uptime
for r in 1 2 3; do
  for sb in 262144 32768 16384; do
    echo "== rep $r --fill --small-bytes $sb"
    $M build/bench/kolo-bench-shm-allreduce --case sweep --max-bytes 262144 --iters 400 --fill --small-bytes $sb | grep -E "sweep" | grep -E " (16384|65536|262144) "
  done
done
uptime
