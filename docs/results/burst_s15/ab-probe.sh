#!/bin/bash
# h2 s14 (reused s15): the burst probe (probe.cc: 1,000 x 4 KB submit / synchronize / one 4 MB MPI_Allreduce
# per step, medians of STEPS steps), base vs new libkolo in ABBA blocks. Build the probe with
#   mpicxx -O2 -std=c++20 -I include docs/results/burst_s14/probe.cc -o /tmp/h2p/probe -L build -lkolo
P=${PROBE:-/tmp/h2p/probe}
uptime
for rep in $(seq ${PAIRS:-1}); do
  for v in base new new base; do
    if [ $v = base ]; then L=$BASE; else L=$NEW; fi
    echo -n "$v block $rep: "
    LD_LIBRARY_PATH=$L timeout 60 mpirun -np ${NP:-2} --oversubscribe --allow-run-as-root --bind-to none $P ${STEPS:-300}
  done
done
uptime
