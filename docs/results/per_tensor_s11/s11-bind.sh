#!/bin/bash
# h2 s11: 16-256 KB np2, ranks unbound vs bound to a core each (mpirun --bind-to core), alternated.
uptime
for b in none core none core; do
  echo "== --bind-to $b"
  timeout 60 mpirun --oversubscribe --allow-run-as-root --bind-to $b -np 2 /work/h2/build/bench/kolo-bench-allreduce --min-bytes 16K --max-bytes 256K --factor 4 | grep -v '^#'
done
uptime
