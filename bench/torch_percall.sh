#!/usr/bin/env bash
# Per-call cost of kolo.torch for small tensors beside torch.distributed (gloo) and beside
# kolo's own C++ figures for the same sizes, in one run (bench/torch_percall.py explains the
# Python part). Output goes to stdout and OUT_DIR/torch_percall_np<NP>.txt.
#
#   bench/torch_percall.sh [BUILD_DIR] [OUT_DIR] [-- extra args for torch_percall.py]
#
# NP (default 2; above the core count mpirun oversubscribes), CXX=0 skips the C++ figures.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
out="${2:-$build/bench-results}"
shift $(( $# > 2 ? 2 : $# )); [ "${1:-}" = "--" ] && shift
np="${NP:-2}"
mkdir -p "$out"
[ -f "$build/python/kolo/torch/__init__.py" ] || { echo "torch_percall: kolo.torch not built in $build/python" >&2; exit 1; }
flags=(--oversubscribe); [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
{
  echo "# $(uptime) ; np=$np on $(nproc) cores"
  if [ "${CXX:-1}" != 0 ]; then
    echo "## C++ (kolo-bench-allreduce): lone allreduce (sum) 4 B .. 4 KB, then 1000 x 4 KB (workload tiny)"
    mpirun -np "$np" "${flags[@]}" "$build/bench/kolo-bench-allreduce" \
      --min-bytes 4 --max-bytes 4096 --factor 4
    mpirun -np "$np" "${flags[@]}" "$build/bench/kolo-bench-allreduce" --workload tiny
  fi
  echo "## Python (kolo.torch and torch.distributed gloo, same processes)"
  PYTHONPATH="$build/python" mpirun -np "$np" "${flags[@]}" /usr/bin/python3 "$here/torch_percall.py" "$@"
  echo "# $(uptime)"
} 2>&1 | tee "$out/torch_percall_np$np.txt"
