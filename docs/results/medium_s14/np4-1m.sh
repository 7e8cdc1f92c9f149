#!/bin/bash
# h3 s14: np=4 1 MB (chunked path), engine alone --fill, libkolo before/after 5f0ec72, ABBA x2.
M="timeout 60 mpirun --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH"
B=/work/h3/build/bench/kolo-bench-shm-allreduce
uptime
for v in base new new base base new new base; do
  export LD_LIBRARY_PATH=/tmp/h3s14/kern-$v
  echo "== $v"; $M -np 4 $B --case sweep --fill --max-bytes 1048576 --factor 4 --iters 60 | grep -v '^#' | awk '$3>=262144 {print $2,$3,$4,$5,$NF}'
done
uptime
