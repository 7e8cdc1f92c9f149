#!/bin/bash
# h2 s11: KOLO_BURST_DEFER alternated, tiny probe (1000 x 4 KB + one 4 MB MPI_Allreduce same loop) np2,
# and the bench's tiny workload.
M="mpirun --oversubscribe --allow-run-as-root --bind-to none -x KOLO_BURST_DEFER"
uptime
for d in "$@"; do
  echo "== probe KOLO_BURST_DEFER=$d"; KOLO_BURST_DEFER=$d timeout 60 $M -np 2 /tmp/h2tiny2 400 mpi | grep "rank 0"
  echo "== bench tiny KOLO_BURST_DEFER=$d"; KOLO_BURST_DEFER=$d timeout 60 $M -np 2 /work/h2/build/bench/kolo-bench-allreduce --workload tiny --iters 60 | grep -E "\(b\)|kolo,|collectives"
done
uptime
