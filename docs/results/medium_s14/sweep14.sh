#!/bin/bash
# #17 s14 (h3): the engine (--fill) and the runtime beside MPI, 16 KB .. 1 MB, np=2 and np=4, with
# the floor column of kolo-bench-allreduce. One call of this script is one quiet run (~1 min).
cd /work/h3
M="timeout 120 mpirun --oversubscribe --allow-run-as-root"
uptime
for np in 2 4; do
  echo "== engine np=$np --fill"
  $M -np $np build/bench/kolo-bench-shm-allreduce --case sweep --fill --max-bytes 1048576 --factor 4 --iters 100 \
    | grep -v '^#' | awk '$3>=16384'
  echo "== runtime np=$np"
  $M -np $np build/bench/kolo-bench-allreduce --min-bytes 16K --max-bytes 1M --factor 4 --iters 100
done
uptime
