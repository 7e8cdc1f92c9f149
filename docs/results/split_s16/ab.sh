#!/bin/bash
# Issue 29 (h-split, session 16): the core/ refactor against the previous main, np=2, ABBA blocks
# (PAIRS, default 3). base = c45edbe built in /work/h-split-base/build, new = branch split in
# /work/h-split/build; each side runs its own bench binary with its own libkolo (Status's
# layout changed in between, so the binaries are not interchangeable). Per block: the
# ResNet-50 gradient step (--workload resnet50), the 1,000 x 4 KB burst (--workload tiny),
# and lone 4 B / 4 KB allreduces (columns: bytes, kolo us, MPI us, kolo/MPI), kolo beside MPI
# in every run. Run under flock -x /tmp/kolo-quiet.lock.
M="timeout 180 mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -np 2"
uptime
for rep in $(seq ${PAIRS:-3}); do
  for v in base new new base; do
    if [ $v = base ]; then D=/work/h-split-base/build; else D=/work/h-split/build; fi
    export LD_LIBRARY_PATH=$D
    B=$D/bench/kolo-bench-allreduce
    echo "== $v block $rep resnet50"; $M $B --workload resnet50 --iters ${ITERS_RESNET:-10} | grep -E "kolo|MPI"
    echo "== $v block $rep tiny"; $M $B --workload tiny --iters ${ITERS:-40} | grep -E "kolo|MPI"
    echo "== $v block $rep lone"; $M $B --min-bytes 4 --max-bytes 4K --factor 1024 | grep -v '^#' | awk '{print $1, $4, $9, $14}'
  done
done
uptime
