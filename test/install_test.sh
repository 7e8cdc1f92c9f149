#!/usr/bin/env bash
# Installs kolo from build dir $1 into a fresh prefix, builds examples/user_project against
# it, and runs it under mpirun -np 2. With KOLO_INSTALL_TEST_TORCH=1 the project's LibTorch
# program (find_package(kolo COMPONENTS torch)) is built and run too. Exits non-zero on any
# failure.
set -euo pipefail
build=$1; src=$2; shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
torch=${KOLO_INSTALL_TEST_TORCH:-0}
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/examples/user_project" -B "$work/up" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DUSER_WITH_TORCH=$([ "$torch" = 1 ] && echo ON || echo OFF) >/dev/null
cmake --build "$work/up" >/dev/null
export LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}"
mpirun -np 2 "$@" "$work/up/user_app"
if [ "$torch" = 1 ]; then
  mpirun -np 2 "$@" "$work/up/user_torch_app"
fi
