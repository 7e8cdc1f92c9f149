#!/bin/bash
# h2 s14 task 2: #17's three targets at np=4 (4 ranks on 2 cores, oversubscribed), each beside MPI,
# with main's build (no LD_LIBRARY_PATH swap): the lone tensor (4 B .. 4 KB), 16 KB .. 1 MB
# (runtime, buffer rewritten, as h3's sweep14.sh), and the 1,000 x 4 KB burst (--workload tiny,
# as ab-burst.sh) beside one 4 MB MPI_Allreduce; then one np=2 burst as a reference in the same
# sitting. One call of this script is one quiet run.
cd /work/h2
M="timeout 120 mpirun --oversubscribe --allow-run-as-root --bind-to none"
B=build/bench/kolo-bench-allreduce
uptime
echo "== np=4 lone"
$M -np 4 $B --min-bytes 4 --max-bytes 4K --factor 4 | grep -E '^#.*size|^ +(4|1024|4096) '
echo "== np=4 runtime 16 KB .. 1 MB"
$M -np 4 $B --min-bytes 16K --max-bytes 1M --factor 4 --iters 100 | grep -E '^#.*size|^ +[0-9]'
echo "== np=4 tiny"
$M -np 4 $B --workload tiny --iters 40 | grep -E "kolo|MPI"
echo "== np=2 tiny (reference)"
$M -np 2 $B --workload tiny --iters 40 | grep -E "kolo|MPI"
uptime
