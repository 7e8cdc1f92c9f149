#!/bin/bash
# h3 s14: one step (plain) vs the np=2 cross-memory-attach prototype (KOLO_CMA=1; needs
# cma-direct.diff applied), alternated 3x in one run, --fill.
cd /work/h3
uptime
for i in 1 2 3; do for v in ${ORDER:-plain cma}; do
  if [ $v = cma ]; then X="-x KOLO_CMA=1"; else X=""; fi
  echo "== $v $i"
  timeout 60 mpirun -np ${NP:-2} --oversubscribe --allow-run-as-root $X build/bench/kolo-bench-shm-allreduce --case sweep --fill --max-bytes 262144 --factor 2 --iters 100 2>&1 | grep -v "^#" | awk '$3>=16384 {print $2,$3,$4,$5,$NF}'
done; done
uptime
