#!/bin/bash
# A/B in one run: the one-step path in parts of A bytes vs B bytes (second group), --fill.
# Needs small-parts.diff applied (it adds --fragment-bytes/--compare-fragment). usage: parts.sh NP A B
cd /work/h3
uptime
timeout 170 mpirun -np $1 --oversubscribe --allow-run-as-root build/bench/kolo-bench-shm-allreduce --case sweep --fill --max-bytes 262144 --factor 2 --iters ${ITERS:-60} --fragment-bytes $2 --compare-fragment $3 2>&1 | grep -v "^#" | awk '$3>=16384 {print $2,$3,$4,$5,$NF}'
