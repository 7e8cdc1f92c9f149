#!/bin/bash
# h2 s14 (reused s15, NP added): the 1,000 x 4 KB burst (--workload tiny) and lone 4 B / 4 KB allreduces, base vs new
# libkolo (LD_LIBRARY_PATH), ABBA order; kolo beside MPI in every run. BASE, NEW: the two
# libraries' folders; PAIRS: how many ABBA blocks.
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=/work/h2/build/bench/kolo-bench-allreduce
uptime
for rep in $(seq ${PAIRS:-1}); do
  for v in base new new base; do
    if [ $v = base ]; then export LD_LIBRARY_PATH=$BASE; else export LD_LIBRARY_PATH=$NEW; fi
    echo "== $v block $rep tiny"; timeout 60 $M -np ${NP:-2} $B --workload tiny --iters ${ITERS:-40} | grep -E "kolo|MPI"
    if [ -z "$NOLONE" ]; then echo "== $v block $rep lone"; timeout 60 $M -np ${NP:-2} $B --min-bytes 4 --max-bytes 4K --factor 1024 | grep -v '^#' | awk '{print $1, $4, $9, $14}'; fi
  done
done
uptime
