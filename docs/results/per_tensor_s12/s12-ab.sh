#!/bin/bash
# h2 s12: base (main 80f137b libkolo) vs new, alternated: tiny probe (1000 x 4 KB + one 4 MB MPI_Allreduce)
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
export KOLO_BURST_DEFER=0
uptime
for rep in $(seq ${REPS:-3}); do
  for v in base new; do
    if [ $v = base ]; then export LD_LIBRARY_PATH=/tmp/h2-base; else export LD_LIBRARY_PATH=${NEWLIB:-/tmp/h2-new}; fi
    echo "== $v rep $rep"; timeout 60 $M -np ${NP:-2} /tmp/h2tiny2 ${ITERS:-200} mpi 2>&1 | grep "rank 0"
  done
done
uptime
