#!/bin/bash
# h3 s14: the fp32/fp64 sum kernel with its loads inlined (new) vs main's (base, load_ps a
# call per 8 floats), same bench binary, libkolo swapped by LD_LIBRARY_PATH, --fill; then
# the lone 4 KB and 64 MB. ORDER sets the order (ABBA across calls).
cd /work/h3
M="timeout 60 mpirun --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH"
B=build/bench/kolo-bench-shm-allreduce
uptime
for v in ${ORDER:-base new}; do
  export LD_LIBRARY_PATH=/tmp/h3s14/kern-$v
  for np in 2 4; do
    echo "== $v np=$np"
    $M -np $np $B --case sweep --fill --max-bytes 1048576 --factor 4 --iters 100 | grep -v '^#' | awk '$3>=16384 {print $2,$3,$4,$5,$NF}'
  done
  echo "== $v np=2 4KB, 64MB"
  $M -np 2 $B --case 4KB --iters 100 | grep -v '^#' | awk '{print $1,$2,$3,$4,$5,$NF}'
  $M -np 2 $B --case 64MB --iters 10 | grep -v '^#' | awk '{print $1,$2,$3,$4,$5,$NF}'
done
uptime
