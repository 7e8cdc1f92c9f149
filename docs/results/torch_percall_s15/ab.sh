#!/usr/bin/env bash
# A/B of kolo.torch per-call cost: A = the package before (copy), B = the build. Order as args.
# h4-ab.sh NP PART A B B A ...
np=$1; part=$2; shift 2
cd /work/h4
echo "# $(uptime) np=$np part=$part order: $*"
for v in "$@"; do
  if [ "$v" = A ]; then pp=/tmp/h4x/A; else pp=/tmp/h4x/B; fi
  echo "== $v"
  PYTHONPATH=$pp mpirun -np "$np" --oversubscribe --allow-run-as-root /usr/bin/python3 bench/torch_percall.py --part "$part" --calls 100 --rounds 5 --burst-steps 3 --burst-rounds 3
done
echo "# $(uptime)"
