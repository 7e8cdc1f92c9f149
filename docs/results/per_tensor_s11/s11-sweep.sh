#!/bin/bash
# h2 s11: kolo-bench-allreduce sweep np=$1 up to $2 (kolo beside MPI, floor column), build after 963d411.
M="mpirun --oversubscribe --allow-run-as-root --bind-to none"
uptime; git -C /work/h2 log --oneline -1 | cut -c1-60
timeout 170 $M -np $1 /work/h2/build/bench/kolo-bench-allreduce --max-bytes $2 --factor 4
uptime
