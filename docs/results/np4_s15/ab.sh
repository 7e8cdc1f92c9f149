#!/bin/bash
# h3 s15: #17 at np=4 (4 ranks on 2 cores, --bind-to none, oversubscribed). One call = one quiet run.
# ORDER: space-separated NAME=DIR entries (a libkolo.so build each, swapped via LD_LIBRARY_PATH), run in
# that order (give an ABBA order), each: the lone 4 B/4 KB, 64 KB/256 KB (buffer rewritten, 100
# iters) and the 1,000 x 4 KB burst (--workload tiny, 40 iters), every row beside MPI in the same
# process. NP (default 4). Prints uptime before and after.
cd /work/h3
NP=${NP:-4}
M="timeout 100 mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH"
B=build/bench/kolo-bench-allreduce
uptime
for entry in $ORDER; do
  name=${entry%%=*}; dir=${entry#*=}
  echo "== $name np=$NP lone"
  LD_LIBRARY_PATH=$dir $M -np $NP $B --min-bytes 4 --max-bytes 4K --factor 1024 | grep -E '^ +(4|4096) '
  echo "== $name np=$NP 64K/256K"
  LD_LIBRARY_PATH=$dir $M -np $NP $B --min-bytes 64K --max-bytes 256K --factor 4 --iters 100 | grep -E '^ +[0-9]'
  echo "== $name np=$NP tiny"
  LD_LIBRARY_PATH=$dir $M -np $NP $B --workload tiny --iters 40 | grep -E "kolo, |one buffer"
done
uptime
