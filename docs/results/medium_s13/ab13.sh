#!/bin/bash
# A/B: base (main's libkolo via LD_LIBRARY_PATH) vs new (this build), alternated.
cd /work/h3
M="mpirun -np 2 --oversubscribe --allow-run-as-root"
uptime
for i in $(seq 1 ${PAIRS:-4}); do
  for v in base new; do
    if [ $v = base ]; then L="-x LD_LIBRARY_PATH=${BASE:-/tmp/h3p/base13}"; else L=""; fi
    echo "== $v $i"
    $M $L "$@"
  done
done
uptime
