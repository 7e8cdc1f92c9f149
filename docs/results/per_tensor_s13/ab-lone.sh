#!/bin/bash
# h2 s13: lone small allreduces, base (main c459fbb libkolo) vs new, alternated; kolo beside MPI in each run
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=/work/h2/build/bench/kolo-bench-allreduce
uptime
for rep in $(seq ${REPS:-2}); do
  for v in base new; do
    if [ $v = base ]; then export LD_LIBRARY_PATH=${BASE:-/tmp/h2-base13}; else export LD_LIBRARY_PATH=${NEW:-/tmp/h2-new13}; fi
    echo "== $v rep $rep np ${NP:-2}"; timeout 60 $M -np ${NP:-2} $B --min-bytes ${MINB:-4} --max-bytes ${MAXB:-64K} --factor 4 | grep -v '^#' | awk '{print $1, $4, $9, $14}'
  done
done
uptime
