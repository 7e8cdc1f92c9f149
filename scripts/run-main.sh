#!/usr/bin/env bash
# README's main command: set-up, build, then the main job under mpirun -np ${NP:-2}.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
np=${NP:-2}
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
build=${KOLO_BUILD_DIR:-build}
exec mpirun -np "$np" "${flags[@]}" "$build/examples/kolo-allreduce-demo" "$@"
