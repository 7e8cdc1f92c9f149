#!/bin/bash
# h2 s11: base (main f36eb77) vs new lib, alternated; tiny probe (1000 x 4KB + one 4MB MPI_Allreduce
# in the same loop) and lone 4K/16K/64K beside MPI. Lib chosen with LD_LIBRARY_PATH (RUNPATH).
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x KOLO_BURST_DEFER"
B=/work/h2/build/bench/kolo-bench-allreduce
export KOLO_BURST_DEFER=${DEFER:-0}
uptime
for rep in $(seq ${REPS:-2}); do
  for v in base new; do
    if [ $v = base ]; then export LD_LIBRARY_PATH=/work/h2-base/build; else export LD_LIBRARY_PATH=/work/h2/build; fi
    echo "== $v rep $rep tiny probe (defer $KOLO_BURST_DEFER)"; timeout 60 $M -np 2 /tmp/h2tiny2 ${ITERS:-200} mpi
    echo "== $v rep $rep lone"; timeout 60 $M -np 2 $B --min-bytes 4K --max-bytes 64K --factor 4 | grep -v '^#'
  done
done
uptime
