#!/bin/bash
# h3 s12: MPI_Allreduce at 64-256 KB as each bench times it (kolo-bench-allreduce: fill + barrier before each call, kolo and MPI shuffled;
# kolo-bench-shm-allreduce --batch 1: barrier before each call, no fill, MPI's calls in one block).
M="mpirun -np 2 --oversubscribe --allow-run-as-root"
uptime
for r in 1 2; do
  echo "== allreduce-bench rep $r"; timeout 60 $M /work/h3/build/bench/kolo-bench-allreduce --min-bytes 64K --max-bytes 256K --factor 4 --iters 200 | grep -v '^#'
  echo "== shm-bench batch1 rep $r"; timeout 60 $M /work/h3/build/bench/kolo-bench-shm-allreduce --case sweep --batch 1 --factor 4 --max-bytes 262144 | grep -E "sweep" | grep -E " 65536 | 262144 "
done
uptime
