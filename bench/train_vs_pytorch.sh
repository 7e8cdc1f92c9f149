#!/usr/bin/env bash
# Training throughput of kolo's CPU trainer beside PyTorch on CPU, same model, batch size
# and thread count, measured in the same run (alternating, best of REPEATS each, so that
# load from other processes hits both alike).
#
#   bench/train_vs_pytorch.sh [BUILD_DIR] [OUT_DIR]
#
# kolo side: kolo-train on synthetic data (LeNet 1x28x28, ResNet-20 3x32x32), one rank,
# --threads 1; the rate of the second epoch (the first includes allocation warm-up).
# PyTorch side: bench/train_vs_pytorch.py with the same architectures (Debian's
# python3-torch, installed here when missing). Writes OUT_DIR/train_vs_pytorch.json.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
out="${2:-$build/bench-results}"
threads="${THREADS:-1}"
repeats="${REPEATS:-3}"
mkdir -p "$out"
train="$build/examples/kolo-train"
[ -x "$train" ] || { echo "train_vs_pytorch: $train not built (cmake --build $build)" >&2; exit 1; }

# Debian's interpreter and torch, not whatever python3 is first on PATH.
py=/usr/bin/python3
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "train_vs_pytorch: installing python3-torch (Debian)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi

kolo_rate() {  # model batch steps
  local json="$out/kolo_$1.json"
  OMP_NUM_THREADS="$threads" "$train" --model "$1" --dataset synthetic --batch-size "$2" \
    --threads "$threads" --epochs 2 --max-batches "$3" --synthetic-size $(( $2 * $3 )) \
    --no-eval --log-interval 100000 --lr 0.01 --warmup-epochs 0 --schedule constant \
    --metrics-json "$json" >/dev/null
  "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['epochs'][-1]['images_per_sec'])" "$json"
}

torch_rate() {  # model batch steps
  OMP_NUM_THREADS="$threads" "$py" "$here/train_vs_pytorch.py" --model "$1" --batch-size "$2" \
    --threads "$threads" --steps "$3" | "$py" -c "import json,sys; print(json.load(sys.stdin)['images_per_sec'])"
}

best() { printf '%s\n' "$@" | sort -g | tail -1; }

results="[]"
printf '%-9s %6s %8s %14s %14s %7s\n' model batch threads kolo_img/s torch_img/s ratio
for spec in "lenet 64 200" "resnet20 128 12"; do
  set -- $spec
  k=(); t=()
  for _ in $(seq "$repeats"); do
    k+=("$(kolo_rate "$1" "$2" "$3")")
    t+=("$(torch_rate "$1" "$2" "$3")")
  done
  kb=$(best "${k[@]}"); tb=$(best "${t[@]}")
  ratio=$("$py" -c "print(f'{$kb/$tb:.2f}')")
  printf '%-9s %6s %8s %14.1f %14.1f %6sx\n' "$1" "$2" "$threads" "$kb" "$tb" "$ratio"
  results=$("$py" -c "import json,sys; r=json.loads(sys.argv[1]); r.append(dict(model=sys.argv[2], batch=int(sys.argv[3]), threads=int(sys.argv[4]), kolo_images_per_sec=float(sys.argv[5]), pytorch_images_per_sec=float(sys.argv[6]), ratio=float(sys.argv[7]), kolo_runs=sys.argv[8].split(), pytorch_runs=sys.argv[9].split())); print(json.dumps(r))" \
    "$results" "$1" "$2" "$threads" "$kb" "$tb" "$ratio" "${k[*]}" "${t[*]}")
done
echo "$results" > "$out/train_vs_pytorch.json"
echo "train_vs_pytorch: results in $out/train_vs_pytorch.json"
