#!/bin/bash
cd /work/h3
M="mpirun -np 2 --oversubscribe --allow-run-as-root"
uptime
for r in 1 2 3; do
  for f in "--batch 1" "--fill"; do
    echo "== rep $r $f"
    $M build/bench/kolo-bench-shm-allreduce --case sweep --max-bytes 1048576 --iters 300 $f | grep -E "sweep|^#"
  done
done
uptime
