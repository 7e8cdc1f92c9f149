#!/usr/bin/env bash
# Training throughput of kolo's GPU trainer beside PyTorch on the same GPU, same model and
# batch, measured in the same run (alternating kolo / PyTorch, best of REPEATS each):
# LeNet-5 batch 256 and ResNet-50 (224x224, synthetic) batch 128 by default.
#
#   bench/gpu_vs_pytorch.sh [BUILD_DIR] [OUT_DIR]
#
# kolo side: `kolo-bench-train --device gpu` (kolo-train's loop on nn/gpu, one rank, the
# gradients allreduced through kolo's GPU executor), under `mpirun -np 1` when mpirun is on
# PATH. PyTorch side: bench/gpu_vs_pytorch.py with the python3 on PATH (or $PYTHON).
# Prints a table with the ratio kolo/PyTorch and writes OUT_DIR/gpu_vs_pytorch.json.
# Without a GPU it says so and exits 0. CASES="lenet:256 resnet50:128" picks the runs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
out="${2:-$build/bench-results}"
repeats="${REPEATS:-2}"
cases="${CASES:-lenet:256 resnet50:128}"
py="${PYTHON:-python3}"
mkdir -p "$out"
bench="$build/bench/kolo-bench-train"
[ -x "$bench" ] || { echo "gpu_vs_pytorch: $bench not built" >&2; exit 1; }
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_vs_pytorch: no GPU found: nothing to measure"
  exit 0
fi
launch=()
command -v mpirun >/dev/null && launch=(mpirun -np 1)

kolo_rate() {  # model batch steps -> images/s
  local json="$out/kolo_$1_$2.json"
  "${launch[@]}" "$bench" --device gpu --model "$1" --batch-size "$2" --warmup 5 --steps "$3" --json "$json" \
    >"$out/kolo_$1_$2.log" 2>&1 || { echo "gpu_vs_pytorch: kolo failed, see $out/kolo_$1_$2.log" >&2; return 1; }
  "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_s_total'])" "$json"
}

torch_rate() {  # model batch steps -> images/s
  "$py" "$here/gpu_vs_pytorch.py" --model "$1" --batch "$2" --warmup 5 --steps "$3" >"$out/torch_$1_$2.json" \
    2>"$out/torch_$1_$2.log" || { echo "gpu_vs_pytorch: PyTorch failed, see $out/torch_$1_$2.log" >&2; return 1; }
  "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_sec'])" "$out/torch_$1_$2.json"
}

best() { printf '%s\n' "$@" | sort -g | tail -1; }

results="[]"
printf '%-10s %6s %16s %16s %8s\n' model batch kolo_images/s pytorch_images/s ratio
for c in $cases; do
  model=${c%%:*}; batch=${c##*:}
  steps=30; [ "$model" = resnet50 ] && steps=15
  k=(); t=()
  for _ in $(seq "$repeats"); do
    k+=("$(kolo_rate "$model" "$batch" "$steps" || echo 0)")
    t+=("$(torch_rate "$model" "$batch" "$steps" || echo 0)")
  done
  kb=$(best "${k[@]}"); tb=$(best "${t[@]}")
  ratio=$("$py" -c "import sys; k,t=float(sys.argv[1]),float(sys.argv[2]); print(f'{k/t:.3f}' if t>0 else 'nan')" "$kb" "$tb")
  printf '%-10s %6s %16.1f %16.1f %8s\n' "$model" "$batch" "$kb" "$tb" "$ratio"
  results=$("$py" -c "import json,sys; r=json.loads(sys.argv[1]); r.append(dict(model=sys.argv[2], batch=int(sys.argv[3]), kolo_images_per_sec=float(sys.argv[4]), pytorch_images_per_sec=float(sys.argv[5]), ratio=sys.argv[6], kolo_runs=sys.argv[7].split(), pytorch_runs=sys.argv[8].split())); print(json.dumps(r))" \
    "$results" "$model" "$batch" "$kb" "$tb" "$ratio" "${k[*]}" "${t[*]}")
done
echo "$results" | "$py" -m json.tool >"$out/gpu_vs_pytorch.json"
echo "wrote $out/gpu_vs_pytorch.json"
