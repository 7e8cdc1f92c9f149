#!/bin/bash
# h2 s11: the engine alone (batch 1) and the runtime (helping on) at 16-256 KB, np2, alternated twice.
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2"
uptime
for rep in 1 2; do
  echo "== engine alone rep $rep"; timeout 60 $M /work/h2/build/bench/kolo-bench-shm-allreduce --case sweep --batch 1 --factor 4 --max-bytes 262144 | grep -E "sweep"
  echo "== runtime rep $rep"; timeout 60 $M /work/h2/build/bench/kolo-bench-allreduce --min-bytes 16K --max-bytes 256K --factor 4 | grep -v '^#'
done
uptime
