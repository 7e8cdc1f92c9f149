#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds kolo into ${KOLO_BUILD_DIR:-build}.
# `--main` first: only what the main job needs (kolo-train: its packages and its targets);
# the tests, benchmarks, the LibTorch adapter and the Python module are built by the commands
# that use them (scripts/test.sh builds everything). Other arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
main=0
if [ "${1:-}" = "--main" ]; then
  main=1
  shift
fi
if [ "$main" = 1 ]; then scripts/install-deps.sh --main; else scripts/install-deps.sh; fi
build=${KOLO_BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
echo "build: configuring $build (CMake, Ninja, Release)" >&2
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
if [ "$main" = 1 ]; then
  echo "build: kolo-train and the libraries it needs" >&2
  cmake --build "$build" -j "$(nproc)" --target kolo-train
else
  echo "build: everything (libraries, trainer, tests, benchmarks, the LibTorch and Python fronts)" >&2
  cmake --build "$build" -j "$(nproc)"
fi
