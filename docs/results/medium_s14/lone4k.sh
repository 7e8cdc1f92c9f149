#!/bin/bash
# h3 s14: the lone 4 KB allreduce in the runtime (kolo-bench-allreduce), libkolo before (base) /
# after (new) 5f0ec72, alternated ABBA in one run.
M="timeout 60 mpirun --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH"
B=/work/h3/build/bench/kolo-bench-allreduce
uptime
for v in base new new base; do
  export LD_LIBRARY_PATH=/tmp/h3s14/kern-$v
  echo "== $v"; $M -np 2 $B --min-bytes 4K --max-bytes 4K --iters 2000 | grep -v '^#'
done
uptime
