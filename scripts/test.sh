#!/usr/bin/env bash
# README's test command: set-up, build, and the whole suite (unit, mpi at np 2 and 4,
# install). Extra arguments go to ctest (e.g. -L mpi).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd "${KOLO_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 600 "$@"
