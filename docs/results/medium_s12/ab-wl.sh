#!/bin/bash
# h3 s12 must-not-regress A/B: 4 B and 64 MB, tiny and resnet50 workloads; base (main's libkolo) vs new, alternated.
REPS=${REPS:-2}
B=/work/h3/build/bench/kolo-bench-allreduce
M="mpirun -np 2 --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH"
uptime
for r in $(seq $REPS); do
  for v in base new; do
    if [ $v = base ]; then L=/tmp/h3p/base; else L=/work/h3/build; fi
    echo "== $v rep $r"
    export LD_LIBRARY_PATH=$L
    timeout 60 $M $B --min-bytes 4 --max-bytes 4 --iters 400 2>&1 | grep -v "^#"
    timeout 60 $M $B --min-bytes 64M --max-bytes 64M --iters 8 2>&1 | grep -v "^#"
    for w in ${WL:-tiny resnet50}; do timeout 90 $M $B --workload $w 2>&1 | grep -vE "^$" | tail -${TAILN:-6}; done
  done
done
uptime
