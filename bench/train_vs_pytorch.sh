#!/usr/bin/env bash
# Training throughput of kolo's CPU trainer beside PyTorch on CPU, same model, batch size
# and thread count, measured in the same run (alternating, best of REPEATS each, so that
# load from other processes hits both alike). Two rates each: images per wall second, and
# images per second of process CPU time (all threads) — on a shared machine the CPU-time
# rate is the steadier one (wall time then depends on how the scheduler shares the cores).
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
  "$py" -c "import json,sys; e=json.load(open(sys.argv[1]))['epochs'][-1]; print(e['images_per_sec'], e['images_per_cpu_sec'])" "$json"
}

torch_rate() {  # model batch steps
  OMP_NUM_THREADS="$threads" "$py" "$here/train_vs_pytorch.py" --model "$1" --batch-size "$2" \
    --threads "$threads" --steps "$3" | "$py" -c "import json,sys; r=json.load(sys.stdin); print(r['images_per_sec'], r['images_per_cpu_sec'])"
}

best() { printf '%s\n' "$@" | sort -g | tail -1; }

results="[]"
printf '%-9s %6s %8s %12s %12s %7s %12s %12s %8s\n' model batch threads kolo_img/s torch_img/s ratio \
  kolo_cpu torch_cpu cpu_ratio
for spec in "lenet 64 200" "resnet20 128 12"; do
  set -- $spec
  k=(); t=(); kc=(); tc=()
  for _ in $(seq "$repeats"); do
    read -r w c <<<"$(kolo_rate "$1" "$2" "$3")"; k+=("$w"); kc+=("$c")
    read -r w c <<<"$(torch_rate "$1" "$2" "$3")"; t+=("$w"); tc+=("$c")
  done
  kb=$(best "${k[@]}"); tb=$(best "${t[@]}"); kcb=$(best "${kc[@]}"); tcb=$(best "${tc[@]}")
  ratio=$("$py" -c "print(f'{$kb/$tb:.2f}')")
  cratio=$("$py" -c "print(f'{$kcb/$tcb:.2f}')")
  printf '%-9s %6s %8s %12.1f %12.1f %6sx %12.1f %12.1f %7sx\n' "$1" "$2" "$threads" "$kb" "$tb" \
    "$ratio" "$kcb" "$tcb" "$cratio"
  results=$("$py" -c "import json,sys; a=sys.argv; r=json.loads(a[1]); r.append(dict(model=a[2], batch=int(a[3]), threads=int(a[4]), kolo_images_per_sec=float(a[5]), pytorch_images_per_sec=float(a[6]), ratio=float(a[7]), kolo_runs=a[8].split(), pytorch_runs=a[9].split(), kolo_images_per_cpu_sec=float(a[10]), pytorch_images_per_cpu_sec=float(a[11]), cpu_ratio=float(a[12]), kolo_cpu_runs=a[13].split(), pytorch_cpu_runs=a[14].split())); print(json.dumps(r))" \
    "$results" "$1" "$2" "$threads" "$kb" "$tb" "$ratio" "${k[*]}" "${t[*]}" "$kcb" "$tcb" "$cratio" "${kc[*]}" "${tc[*]}")
done
echo "$results" > "$out/train_vs_pytorch.json"
echo "train_vs_pytorch: results in $out/train_vs_pytorch.json"
