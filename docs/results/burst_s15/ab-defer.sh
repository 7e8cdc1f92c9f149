#!/bin/bash
# h2 s15 task 2: --workload tiny at np=${NP:-2} with KOLO_BURST_DEFER=0 and =1 in ABBA blocks
# (BLOCKS, default 4), with the lone 4 B / 4 KB sweep after each tiny run (unless NOLONE);
# /work/h2's build, kolo beside MPI in every run.
cd /work/h2
M="timeout 120 mpirun --oversubscribe --allow-run-as-root --bind-to none -x KOLO_BURST_DEFER"
B=build/bench/kolo-bench-allreduce
uptime
for rep in $(seq ${BLOCKS:-4}); do
  for d in 0 1 1 0; do
    export KOLO_BURST_DEFER=$d
    echo "== d$d block $rep tiny"; $M -np ${NP:-2} $B --workload tiny --iters ${ITERS:-40} | grep -E "kolo|MPI"
    if [ -z "$NOLONE" ]; then echo "== d$d block $rep lone"; $M -np ${NP:-2} $B --min-bytes 4 --max-bytes 4K --factor 1024 | grep -v '^#' | awk '{print $1, $4, $9, $14}'; fi
  done
done
uptime
