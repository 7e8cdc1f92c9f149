#!/bin/bash
# deterministic_hashes.sh NP MPIRUN [MPIRUN FLAGS...] -- TEST-BINARY: runs the `[deterministic]`
# tests of kolo_mpi_tests at NP ranks under each CPU executor and host layout, all with
# KOLO_DETERMINISTIC=1, collects the hash of every result that rank 0 prints
# ("KOLO-DETERMINISTIC-HASH np=N H") and fails unless every run passed and printed the same
# hash (docs/runtime.md, "One order for float sums"). Without the option it also runs the
# MPI executor and two pretend hosts, and says whether their hashes differ (at np 4 they do:
# MPI and the hosts' partials add in pairs), without failing on it.
set -u
np=$1
shift
mpirun=()
while [ "$1" != "--" ]; do mpirun+=("$1"); shift; done
shift
binary=$1

configs=(
  "KOLO_DETERMINISTIC=1"                                   # shared memory, one host
  "KOLO_DETERMINISTIC=1 KOLO_FUSION_THRESHOLD=0"           # no fusion
  "KOLO_DETERMINISTIC=1 KOLO_SHM_ARENA_BYTES=0 KOLO_FAST_PATH=0"
  "KOLO_DETERMINISTIC=1 KOLO_CPU_OPERATIONS=mpi"           # the MPI executor
  "KOLO_DETERMINISTIC=1 KOLO_CPU_OPERATIONS=mpi KOLO_CPU_CHUNK_BYTES=64K KOLO_FUSION_THRESHOLD=1M"
  "KOLO_DETERMINISTIC=1 KOLO_TEST_RANKS_PER_HOST=2"        # np 4: 2 x 2 (sliced); np 3: 2 + 1 (leader)
  "KOLO_DETERMINISTIC=1 KOLO_TEST_RANKS_PER_HOST=1"        # one rank per host
  "KOLO_DETERMINISTIC=1 KOLO_TEST_RANKS_PER_HOST=2 KOLO_CROSS_HOST_ALLREDUCE=leader"
)
informative=(
  "KOLO_DETERMINISTIC=0 KOLO_CPU_OPERATIONS=mpi"
  "KOLO_DETERMINISTIC=0 KOLO_TEST_RANKS_PER_HOST=2"
)

# Runs one configuration; prints its hash, or nothing if the run failed or printed none.
run_one() {
  local out rc
  out=$(env $1 "${mpirun[@]}" -np "$np" "$binary" "[deterministic]" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    printf '%s\n' "$out" | tail -40 >&2
    return 1
  fi
  printf '%s\n' "$out" | sed -n "s/.*KOLO-DETERMINISTIC-HASH np=$np \([0-9a-f]*\).*/\1/p" | head -1
}

first="" failed=0
for c in "${configs[@]}"; do
  h=$(run_one "$c") || { echo "FAILED: the run with $c did not pass"; failed=1; continue; }
  echo "np $np  $c  hash=${h:-none}"
  if [ -z "$h" ]; then echo "FAILED: no hash printed with $c"; failed=1; continue; fi
  if [ -z "$first" ]; then first=$h; elif [ "$h" != "$first" ]; then
    echo "FAILED: $c gives hash $h, the first configuration $first"
    failed=1
  fi
done
for c in "${informative[@]}"; do
  h=$(run_one "$c") || { echo "FAILED: the run with $c did not pass"; failed=1; continue; }
  same=$([ "$h" = "$first" ] && echo "the same" || echo "another")
  echo "np $np  $c  hash=${h:-none}  ($same hash without the option; not a failure either way)"
done
if [ $failed -ne 0 ]; then echo "DETERMINISM-FAILED"; exit 1; fi
echo "DETERMINISM-PASSED: ${#configs[@]} configurations at np $np, one hash: $first"
