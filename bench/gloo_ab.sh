#!/usr/bin/env bash
# The ResNet-50 gradient step (kolo-bench-allreduce --workload resnet50: 161 named tensors,
# average; kolo's median per step) on the Gloo backend beside the MPI backend, same run, ABBA:
# A = KOLO_BACKEND=mpi with the MPI executor (KOLO_CPU_OPERATIONS=mpi: Gloo has no shared-memory
# executor yet, docs/gloo.md), B = KOLO_BACKEND=gloo (a redis-server per run,
# test/gloo/with_redis.sh). NP ranks on this host (default 2). Prints one line per run and the
# medians of A and B and B/A. Hold the exclusive lock around it:
#   flock -x /tmp/kolo-quiet.lock bench/gloo_ab.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
bench="$build/bench/kolo-bench-allreduce"
[ -x "$bench" ] || { echo "gloo_ab: $bench not built" >&2; exit 1; }
rounds="${ROUNDS:-2}" iters="${ITERS:-10}" np="${NP:-2}"
flags=(--oversubscribe); [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
step() {  # output of the benchmark -> kolo's median ms
  awk '/kolo, every tensor named and async/ { for (i = 1; i <= NF; ++i) if ($i == "median") print $(i + 1) }'
}
run() {  # mpi | gloo -> ms
  if [ "$1" = gloo ]; then
    "$here/../test/gloo/with_redis.sh" mpirun -np "$np" "${flags[@]}" "$bench" --workload resnet50 --iters "$iters" | step
  else
    KOLO_CPU_OPERATIONS=mpi mpirun -np "$np" "${flags[@]}" "$bench" --workload resnet50 --iters "$iters" | step
  fi
}
echo "gloo_ab: np $np, rounds $rounds (A B B A), iters $iters; load $(cut -d' ' -f1-3 /proc/loadavg)"
a=() b=()
for round in $(seq 1 "$rounds"); do
  for which in mpi gloo gloo mpi; do
    ms=$(run "$which")
    echo "  round $round $which: resnet50 step $ms ms (load $(cut -d' ' -f1 /proc/loadavg))"
    if [ "$which" = mpi ]; then a+=("$ms"); else b+=("$ms"); fi
  done
done
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
awk -v a="$(med "${a[@]}")" -v b="$(med "${b[@]}")" 'BEGIN {
  printf "resnet50 step: A (MPI executor) %.1f ms, B (Gloo) %.1f ms, B/A %.2f\n", a, b, b / a }'
echo "gloo_ab: done; load $(cut -d' ' -f1-3 /proc/loadavg)"
