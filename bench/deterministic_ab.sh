#!/usr/bin/env bash
# A/B of KOLO_DETERMINISTIC (docs/runtime.md, "One order for float sums") in the same run:
# per layout, ROUNDS rounds of A B B A (A = 0, B = 1), each run the ResNet-50 gradient step
# (kolo-bench-allreduce --workload resnet50: 161 named tensors, average; kolo's median per
# step) and one 64 MB float32 sum (the sweep row; kolo's median). Layouts: shared memory on
# one host (np 2), the MPI executor (np 2), two pretend hosts of two ranks (np 4).
# Prints one line per run and, per layout and case, the medians of A and B and B/A.
# Hold the exclusive lock around it (docs: timings run alone):
#   flock -x /tmp/kolo-quiet.lock bench/deterministic_ab.sh [BUILD_DIR]
#   ROUNDS=3 ITERS=20 LAYOUTS="shm mpi hosts" bench/deterministic_ab.sh build
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
bench="$build/bench/kolo-bench-allreduce"
[ -x "$bench" ] || { echo "deterministic_ab: $bench not built" >&2; exit 1; }
rounds="${ROUNDS:-2}"
iters="${ITERS:-20}"
layouts="${LAYOUTS:-shm mpi hosts}"
mpi_flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)

layout_env() {  # LAYOUT -> "NP ENV..."
  case "$1" in
    shm) echo "2" ;;
    mpi) echo "2 KOLO_CPU_OPERATIONS=mpi" ;;
    hosts) echo "4 KOLO_TEST_RANKS_PER_HOST=2" ;;
  esac
}
run() {  # LAYOUT DET -> "resnet50_ms 64mb_ms"
  local spec np
  spec=($(layout_env "$1"))
  np=${spec[0]}
  local envs=("${spec[@]:1}" "KOLO_DETERMINISTIC=$2")
  local r s
  r=$(env "${envs[@]}" mpirun -np "$np" "${mpi_flags[@]}" "$bench" --workload resnet50 --iters "$iters" |
      awk '/kolo, every tensor named and async/ { for (i = 1; i <= NF; ++i) if ($i == "median") print $(i + 1) }')
  s=$(env "${envs[@]}" mpirun -np "$np" "${mpi_flags[@]}" "$bench" --min-bytes 64M --max-bytes 64M --iters "$iters" |
      awk '$1 == 67108864 { print $4 / 1000 }')
  echo "$r $s"
}
echo "deterministic_ab: rounds $rounds (A B B A), iters $iters, layouts: $layouts; load $(cut -d' ' -f1-3 /proc/loadavg)"
for l in $layouts; do
  a_r=() a_s=() b_r=() b_s=()
  for round in $(seq 1 "$rounds"); do
    for det in 0 1 1 0; do
      read -r rn sn <<<"$(run "$l" "$det")"
      echo "  $l round $round KOLO_DETERMINISTIC=$det: resnet50 step ${rn} ms, 64 MB ${sn} ms (load $(cut -d' ' -f1 /proc/loadavg))"
      if [ "$det" = 0 ]; then a_r+=("$rn"); a_s+=("$sn"); else b_r+=("$rn"); b_s+=("$sn"); fi
    done
  done
  med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  ar=$(med "${a_r[@]}") br=$(med "${b_r[@]}") as=$(med "${a_s[@]}") bs=$(med "${b_s[@]}")
  awk -v l="$l" -v ar="$ar" -v br="$br" -v as="$as" -v bs="$bs" 'BEGIN {
    printf "%s: resnet50 step A %.2f ms, B %.2f ms, B/A %.3f; 64 MB A %.2f ms, B %.2f ms, B/A %.3f\n", l, ar, br, br / ar, as, bs, bs / as }'
done
echo "deterministic_ab: done; load $(cut -d' ' -f1-3 /proc/loadavg)"
