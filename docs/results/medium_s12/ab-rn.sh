#!/bin/bash
# h3 s12: ResNet-50 workload, base (main's libkolo before 627dbb5) vs new, alternated 3x, np2.
B=/work/h3/build/bench/kolo-bench-allreduce
M="mpirun -np 2 --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH"
uptime
for r in 1 2 3; do for v in new base; do
  if [ $v = base ]; then L=/tmp/h3p/base; else L=/work/h3/build; fi
  export LD_LIBRARY_PATH=$L
  echo "== $v rep $r"; timeout 80 $M $B --workload resnet50 2>&1 | grep -E "per tensor|one buffer|named|shared"
done; done
uptime
