#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds kolo into ${KOLO_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${KOLO_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
