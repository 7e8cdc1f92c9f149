#!/bin/bash
# h3 s12 A/B: main's libkolo (base) vs this build (new), alternated; kolo-bench-allreduce 16 KB - 1 MB.
NP=${NP:-2}; REPS=${REPS:-3}; ITERS=${ITERS:-200}
B=/work/h3/build/bench/kolo-bench-allreduce
uptime
for r in $(seq $REPS); do
  for v in base new; do
    if [ $v = base ]; then L=/tmp/h3p/base; else L=/work/h3/build; fi
    echo "== np$NP $v rep $r"
    LD_LIBRARY_PATH=$L timeout 100 mpirun -np $NP --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH $B --min-bytes 16K --max-bytes 1M --factor 4 --iters $ITERS $EXTRA 2>&1 | grep -v "^#" 
  done
done
uptime
