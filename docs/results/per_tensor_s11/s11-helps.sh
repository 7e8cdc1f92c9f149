#!/bin/bash
# h2 s11: 16-256 KB np2, KOLO_WAIT_HELPS 1 vs 0, alternated (unbound ranks).
uptime
for h in 1 0 1 0; do
  echo "== KOLO_WAIT_HELPS=$h"
  KOLO_WAIT_HELPS=$h timeout 60 mpirun --oversubscribe --allow-run-as-root --bind-to none -x KOLO_WAIT_HELPS -np 2 /work/h2/build/bench/kolo-bench-allreduce --min-bytes 16K --max-bytes 256K --factor 4 | grep -v '^#'
done
uptime
