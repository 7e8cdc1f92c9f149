#!/bin/bash
# dist_async vs dist_sync accuracy: LeNet on Fashion-MNIST, 2 workers + 1 server, the same
# seed, constant learning rate; prints each run's final test accuracy (docs/benchmarks.md).
#   bench/kvstore_async_accuracy.sh [build dir] [epochs]
set -euo pipefail
BUILD=${1:-build}
EPOCHS=${2:-3}
FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && FLAGS+=(--allow-run-as-root)
for kv in dist_sync dist_async; do
  KOLO_NUM_SERVERS=1 mpirun -np 3 "${FLAGS[@]}" "$BUILD/examples/kolo-train" --kv-store $kv --epochs "$EPOCHS" \
    --schedule constant --warmup-epochs 0 --lr 0.05 --log-interval 100000 |
    grep -E "Test-accuracy" | sed "s/^/$kv: /"
done
