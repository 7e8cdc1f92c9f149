#!/bin/bash
B=/work/h3/build/bench/kolo-bench-allreduce
M="mpirun -np 2 --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH"
uptime
for r in 1 2 3 4; do for v in base new; do
  if [ $v = base ]; then L=/tmp/h3p/base; else L=/work/h3/build; fi
  export LD_LIBRARY_PATH=$L
  echo "$v $r $(timeout 60 $M $B --min-bytes 16M --max-bytes 64M --iters 8 2>&1 | grep -v '^#' | awk '{printf "%s: %s/%s=%s  ", $1, $4, $10, $16}')"
done; done
uptime
