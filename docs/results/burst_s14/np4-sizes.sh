#!/bin/bash
# h2 s14 task 2: more np=4 runs of 16 KB .. 1 MB (as in np4.sh), RUNS (default 4) in one quiet run.
# BIND=1: the ranks bound two to a core (overload allowed) instead of --bind-to none, to see whether
# the slow runs at 64-256 KB come from where the scheduler puts the 4 ranks (np4-sizes-bound-1.txt).
cd /work/h2
M="timeout 120 mpirun --oversubscribe --allow-run-as-root"
if [ -n "$BIND" ]; then M="$M --map-by core --bind-to core:overload-allowed"; else M="$M --bind-to none"; fi
B=build/bench/kolo-bench-allreduce
uptime
for r in $(seq ${RUNS:-4}); do
  echo "== np=4 runtime 16 KB .. 1 MB${BIND:+, bound}, run $r"
  $M -np 4 $B --min-bytes 16K --max-bytes 1M --factor 4 --iters 100 | grep -E '^#.*size|^ +[0-9]'
  sleep 2
done
uptime
