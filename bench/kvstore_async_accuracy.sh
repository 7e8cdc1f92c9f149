#!/bin/bash
# dist_async vs dist_sync accuracy: LeNet on Fashion-MNIST, 2 workers + 1 server, constant
# learning rate, one run per seed and configuration; prints each run's final train loss and
# test accuracy, then the mean over the seeds per configuration (docs/benchmarks.md).
#   bench/kvstore_async_accuracy.sh [build dir] [epochs] [seeds...]
# Configurations: dist_sync; dist_async; dist_async with --kv-lookahead (docs/kvstore.md).
# Extra kolo-train flags for every run: ACCURACY_FLAGS (default: --lr 0.05); the
# configurations to run: ACCURACY_CONFIGS (default: "sync async async-lookahead").
set -euo pipefail
BUILD=${1:-build}
EPOCHS=${2:-3}
shift $(($# < 2 ? $# : 2))
SEEDS=("$@")
[ ${#SEEDS[@]} -eq 0 ] && SEEDS=(42 43 44 45)
read -r -a EXTRA <<<"${ACCURACY_FLAGS:---lr 0.05}"
FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && FLAGS+=(--allow-run-as-root)
declare -A CONFIG=([sync]="--kv-store dist_sync" [async]="--kv-store dist_async"
                   [async-lookahead]="--kv-store dist_async --kv-lookahead")
echo "uptime: $(uptime)"
read -r -a NAMES <<<"${ACCURACY_CONFIGS:-sync async async-lookahead}"
for name in "${NAMES[@]}"; do
  accs=() losses=()
  for seed in "${SEEDS[@]}"; do
    # shellcheck disable=SC2086
    out=$(KOLO_NUM_SERVERS=1 mpirun -np 3 "${FLAGS[@]}" "$BUILD/examples/kolo-train" ${CONFIG[$name]} \
            --epochs "$EPOCHS" --schedule constant --warmup-epochs 0 --seed "$seed" --log-interval 100000 \
            "${EXTRA[@]}" | grep "Test-accuracy" | tail -1)
    acc=$(sed -E 's/.*Test-accuracy=([0-9.]+).*/\1/' <<<"$out")
    loss=$(sed -E 's/.*Train-loss=([0-9.]+).*/\1/' <<<"$out")
    echo "$name seed $seed: train loss $loss, test accuracy $acc"
    accs+=("$acc") losses+=("$loss")
  done
  python3 -c "import statistics as s, sys; a=[float(x) for x in sys.argv[1].split()]; l=[float(x) for x in sys.argv[2].split()]; print('%s mean over %d seeds: train loss %.4f, test accuracy %.4f (sd %.4f)' % (sys.argv[3], len(a), s.mean(l), s.mean(a), s.stdev(a) if len(a) > 1 else 0))" \
    "${accs[*]}" "${losses[*]}" "$name"
done
