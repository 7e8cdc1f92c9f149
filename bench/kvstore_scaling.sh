#!/bin/bash
# Allreduce vs parameter servers on this machine (docs/benchmarks.md, "KVStore"):
# for n = 1, 2, 4 workers, three designs —
#   allreduce  n ranks, kolo's allreduce (KVStore "allreduce"; kolo-train's default path)
#   ps1        n workers + 1 server (KVStore "dist_sync")
#   ps1:1      n workers + n servers
# and the baseline of scaling efficiency, "local": one rank training through KVStore "local"
# (the same update rule, no communication, no coordinator traffic)
# — the communication of one step of ResNet-50's and ResNet-20's gradient sets
# (kolo-bench-kvstore: push + pull, no compute), and ResNet-20 training throughput on
# synthetic data (kolo-train). Every configuration runs --reps times, interleaved, so the
# machine's load falls on all alike; bench/kvstore_plot.py takes the medians, draws the PNG
# and checks the communication-cost model against the measurements.
#
#   bench/kvstore_scaling.sh [build dir] [output dir] [reps]
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-docs/results/kvstore}
REPS=${3:-3}
mkdir -p "$OUT"
FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && FLAGS+=(--allow-run-as-root)
COMM=$OUT/comm.csv
TRAIN=$OUT/train.csv
rm -f "$COMM" "$TRAIN"
echo "label,type,workers,servers,ranks,images_per_sec,loadavg" > "$TRAIN"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run() {  # label type workers servers
  local label=$1 type=$2 n=$3 s=$4 np=$(($3 + $4))
  for wl in resnet50 resnet20; do
    [ "$type" = local ] && break
    KOLO_NUM_SERVERS=$s mpirun -np $np "${FLAGS[@]}" "$BUILD/bench/kolo-bench-kvstore" --type "$type" \
      --workload $wl --steps 5 --warmup 1 --csv "$COMM" --label "$label"
  done
  local kv=$type
  KOLO_NUM_SERVERS=$s mpirun -np $np "${FLAGS[@]}" "$BUILD/examples/kolo-train" --model resnet20 \
    --dataset synthetic --synthetic-size 4096 --batch-size 32 --epochs 2 --max-batches 6 --no-eval \
    --schedule constant --warmup-epochs 0 --kv-store $kv --metrics-json "$TMP/m.json" > /dev/null
  /usr/bin/python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m['epochs'][-1]['images_per_sec'])" \
    "$TMP/m.json" | while read -r ips; do
    echo "$label,$type,$n,$s,$np,$ips,$(cut -d' ' -f1 /proc/loadavg)" >> "$TRAIN"
    echo "train resnet20 $label workers $n servers $s: $ips images/s"
  done
}

for rep in $(seq "$REPS"); do
  echo "== repetition $rep, load $(cut -d' ' -f1-3 /proc/loadavg)"
  run local local 1 0
  for n in 1 2 4; do
    run allreduce allreduce $n 0
    run ps1 dist_sync $n 1
    [ $n -gt 1 ] && run ps1:1 dist_sync $n $n
  done
done
echo "wrote $COMM and $TRAIN"
