#!/usr/bin/env bash
# Installs kolo from build dir $1 into a fresh prefix, builds examples/user_project against
# it, and runs it under mpirun -np 2. Exits non-zero on any failure.
set -euo pipefail
build=$1; src=$2; shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/examples/user_project" -B "$work/up" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/up" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" mpirun -np 2 "$@" "$work/up/user_app"
