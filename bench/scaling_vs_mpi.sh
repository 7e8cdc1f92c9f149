#!/usr/bin/env bash
# Scaling np=1 -> np=2 of kolo's training beside the plain-MPI baseline, in the same run:
# per round, np=1, np=2 with kolo's DistributedOptimizer, np=2 with one blocking
# MPI_Allreduce of all gradients after the backward pass (kolo-bench-train --gradients mpi),
# and np=1 again. Efficiency = np=2 total / (2 x the round's mean np=1); the medians over the
# rounds are printed last, with kolo's np=2 throughput over the baseline's.
#
#   bench/scaling_vs_mpi.sh [BUILD_DIR]
#   MODEL=resnet20 BATCH=32 STEPS=40 ROUNDS=5 bench/scaling_vs_mpi.sh build
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
bench="$build/bench/kolo-bench-train"
[ -x "$bench" ] || { echo "scaling_vs_mpi: $bench not built" >&2; exit 1; }
model="${MODEL:-resnet20}"
batch="${BATCH:-32}"
steps="${STEPS:-40}"
rounds="${ROUNDS:-5}"
mpi_flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
run() {  # NP GRADIENTS -> total images/s
  mpirun -np "$1" "${mpi_flags[@]}" "$bench" --model "$model" --batch-size "$batch" --warmup 3 --steps "$steps" \
    --threads 1 --gradients "$2" | awk '/^images\/s:/ { print $5 }'
}
echo "scaling_vs_mpi: $model, batch $batch per rank, $steps timed steps, 1 thread per rank, $rounds rounds;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
effs_kolo=() effs_mpi=() ratios=()
for r in $(seq 1 "$rounds"); do
  a="$(run 1 kolo)"; k="$(run 2 kolo)"; m="$(run 2 mpi)"; b="$(run 1 kolo)"
  line="$(awk -v a="$a" -v b="$b" -v k="$k" -v m="$m" 'BEGIN {
    one = (a + b) / 2; printf "%.1f %.1f %.3f", 100 * k / (2 * one), 100 * m / (2 * one), k / m }')"
  read -r ek em ratio <<<"$line"
  effs_kolo+=("$ek") effs_mpi+=("$em") ratios+=("$ratio")
  echo "round $r: np=1 $a, $b | np=2 kolo $k ($ek%) | np=2 MPI baseline $m ($em%) | kolo/MPI $ratio"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "median efficiency: kolo $(median "${effs_kolo[@]}")%, MPI baseline $(median "${effs_mpi[@]}")%;" \
     "kolo/MPI np=2 throughput $(median "${ratios[@]}") (load $(cut -d' ' -f1-3 /proc/loadavg))"
