#!/bin/bash
# h2 s15: D1 misses per tensor (cachegrind; this VM has no hardware counters for perf) of the
# session-14 probe (docs/results/burst_s14/probe.cc, 20 + 10 steps) under LIB's libkolo, np=2,
# then the per-tensor table by function group (cgsum.py). Output: /tmp/h2p/cg.$TAG.<pid>.
LD_LIBRARY_PATH=$LIB mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH \
  valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/tmp/h2p/cg.$TAG.%p /tmp/h2p/probe 20
python3 "$(dirname "$0")/cgsum.py" /tmp/h2p/cg.$TAG.*
