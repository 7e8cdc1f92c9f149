#!/usr/bin/env bash
# kolo.torch beside torch.distributed (gloo) and DistributedDataParallel, np=2, one run
# (bench/torch_vs_gloo.py explains what is timed). Output goes to stdout and
# OUT_DIR/torch_vs_gloo.txt.
#
#   bench/torch_vs_gloo.sh [BUILD_DIR] [OUT_DIR] [-- extra args for torch_vs_gloo.py]
#
# NP (default 2), THREADS (torch threads per rank, default 1).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
out="${2:-$build/bench-results}"
shift $(( $# > 2 ? 2 : $# )); [ "${1:-}" = "--" ] && shift
np="${NP:-2}"
mkdir -p "$out"
[ -f "$build/python/kolo/torch/__init__.py" ] || { echo "torch_vs_gloo: kolo.torch not built in $build/python" >&2; exit 1; }
flags=(--oversubscribe); [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
PYTHONPATH="$build/python" mpirun -np "$np" "${flags[@]}" /usr/bin/python3 "$here/torch_vs_gloo.py" \
  --threads "${THREADS:-1}" "$@" | tee "$out/torch_vs_gloo.txt"
