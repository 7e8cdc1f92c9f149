#!/usr/bin/env bash
# README's main command: set-up and a build of the trainer alone (scripts/build.sh --main:
# its packages and targets, not the tests or the other fronts), then the bundled trainer
# under mpirun -np ${NP:-2}:
# LeNet-5 on Fashion-MNIST (Debian's dataset-fashion-mnist), 15 epochs, test accuracy
# ~0.91. Extra arguments go to kolo-train (see kolo-train --help), e.g. --epochs 1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --main
np=${NP:-2}
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
build=${KOLO_BUILD_DIR:-build}
exec mpirun -np "$np" "${flags[@]}" "$build/examples/kolo-train" "$@"
