#!/bin/bash
# dist_async vs dist_sync accuracy: LeNet on Fashion-MNIST, 2 workers + 1 server, one run
# per seed and configuration; prints each run's final train loss and test accuracy, then the
# mean and spread over the seeds per configuration, and each async configuration's gap to
# the sync one of the same schedule (docs/benchmarks.md).
#   bench/kvstore_async_accuracy.sh [build dir] [epochs] [seeds...]
# Configurations (constant rate): sync, async, async-lookahead (--kv-lookahead); with the
# rate scheduled on the servers (cosine decay to 0 after a 0.2-epoch warm-up, KVOptimizer's
# schedule): sync-cosine, async-cosine, async-lookahead-cosine (docs/kvstore.md).
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
CONST="--schedule constant --warmup-epochs 0" COS="--schedule cosine --warmup-epochs 0.2"
declare -A CONFIG=([sync]="--kv-store dist_sync $CONST" [async]="--kv-store dist_async $CONST"
                   [async-lookahead]="--kv-store dist_async --kv-lookahead $CONST"
                   [sync-cosine]="--kv-store dist_sync $COS" [async-cosine]="--kv-store dist_async $COS"
                   [async-lookahead-cosine]="--kv-store dist_async --kv-lookahead $COS")
declare -A ACCS=() LOSSES=()
echo "uptime: $(uptime)"
read -r -a NAMES <<<"${ACCURACY_CONFIGS:-sync async async-lookahead}"
# Seeds outer, configurations inner: each seed's runs of every configuration are neighbours in
# time, so a change of load hits them alike.
for seed in "${SEEDS[@]}"; do
  for name in "${NAMES[@]}"; do
    # shellcheck disable=SC2086
    out=$(KOLO_NUM_SERVERS=1 mpirun -np 3 "${FLAGS[@]}" "$BUILD/examples/kolo-train" ${CONFIG[$name]} \
            --epochs "$EPOCHS" --seed "$seed" --log-interval 100000 \
            "${EXTRA[@]}" | grep "Test-accuracy" | tail -1)
    acc=$(sed -E 's/.*Test-accuracy=([0-9.]+).*/\1/' <<<"$out")
    loss=$(sed -E 's/.*Train-loss=([0-9.]+).*/\1/' <<<"$out")
    echo "$name seed $seed: train loss $loss, test accuracy $acc ($(date -u +%H:%M), load $(cut -d' ' -f1 /proc/loadavg))"
    ACCS[$name]+="$acc " LOSSES[$name]+="$loss "
  done
done
for name in "${NAMES[@]}"; do
  python3 -c "import statistics as s, sys; a=[float(x) for x in sys.argv[1].split()]; l=[float(x) for x in sys.argv[2].split()]; print('%s mean over %d seeds: train loss %.4f, test accuracy %.4f (sd %.4f, min %.4f, max %.4f)' % (sys.argv[3], len(a), s.mean(l), s.mean(a), s.stdev(a) if len(a) > 1 else 0, min(a), max(a)))" \
    "${ACCS[$name]}" "${LOSSES[$name]}" "$name"
done
# Gap of each async configuration to the sync one with the same schedule, seed by seed.
for name in "${NAMES[@]}"; do
  [[ $name == async* ]] || continue
  ref=sync; [[ $name == *-cosine ]] && ref=sync-cosine
  [ -n "${ACCS[$ref]:-}" ] || continue
  python3 -c "import statistics as s, sys; a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]; g=[100*(y-x) for x, y in zip(a, b)]; print('%s behind %s per seed (points): %s; mean gap %.2f points (sd %.2f)' % (sys.argv[3], sys.argv[4], ' '.join('%.2f' % x for x in g), s.mean(g), s.stdev(g) if len(g) > 1 else 0))" \
    "${ACCS[$name]}" "${ACCS[$ref]}" "$name" "$ref"
done
echo "uptime: $(uptime)"
