#!/usr/bin/env bash
# One-shot GPU session for a lent GPU machine (CUDA, NCCL, cuDNN, CMake, ninja, PyTorch; no
# MPI, no package registry). Everything it measures goes to $OUT.
#
#   here (Debian, apt access), once:   scripts/gpu-session.sh prepare
#       fetches Open MPI (/work/shared/tools/openmpi-bundle) and the header-only build
#       dependencies (Eigen, Catch2, CLI11, nlohmann-json, zlib headers) as .debs into
#       .ompi/ (git-ignored; ~11 MB). Carry `.ompi` with the run.
#   there, from the repository root:   scripts/gpu-session.sh [PHASE...]
#       PHASE: env build test bench (default: all four, in that order). Each phase appends
#       its log to $OUT and its status and seconds to $OUT/summary.txt; a failing phase
#       does not stop the next one. The build folder (build-gpu/) survives between calls
#       on a warm machine, so a 10-minute call limit can be met by `env build test` in one
#       call and `bench` in the next.
#
#   env    unpack the bundle (once), record nvidia-smi, nvcc, cuDNN/NCCL, torch, mpirun
#   build  configure with -DKOLO_WITH_CUDA=ON and build only the GPU tests and benchmarks
#   test   ctest -L gpu (on a GPU machine only gpu.scenario.no-gpu should be Skipped)
#   bench  kolo-bench-gpu (pack/unpack vs cudaMemcpy, NCCL executor vs raw ncclAllReduce),
#          then bench/gpu_vs_pytorch.sh (LeNet b256, ResNet-50 b128: kolo vs PyTorch)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="${BUNDLE:-$root/.ompi}"
build="${BUILD_DIR:-$root/build-gpu}"

prepare() {
  local tool=/work/shared/tools/openmpi-bundle
  [ -x "$tool" ] || { echo "gpu-session: $tool not found" >&2; return 1; }
  "$tool" fetch "$bundle"
  # Unpacked copies (from a local trial run) are remade on the device; keep the carry small.
  rm -rf "$bundle/root" "$bundle/bin" "$bundle/deps-root"
  mkdir -p "$bundle/build-debs"
  (cd "$bundle/build-debs" && apt-get download libeigen3-dev catch2 libcli11-dev nlohmann-json3-dev zlib1g-dev \
     >/dev/null 2>&1) || { echo "gpu-session: apt-get download of the build dependencies failed" >&2; return 1; }
  echo "gpu-session: bundle ready in $bundle ($(du -sh "$bundle" | cut -f1)); carry .ompi with the run" >&2
}

if [ "${1:-}" = prepare ]; then
  prepare
  exit $?
fi

: "${OUT:?gpu-session: set OUT to the folder for results (the device machine sets it)}"
mkdir -p "$OUT"
summary="$OUT/summary.txt"

# Open MPI and the build dependencies from the carried bundle (nothing is downloaded here).
setup_env() {
  [ -x "$bundle/openmpi-bundle" ] || { echo "gpu-session: no bundle at $bundle (run 'prepare' first and carry .ompi)" >&2; return 1; }
  # shellcheck disable=SC1090
  source <("$bundle/openmpi-bundle" env "$bundle")
  local deps_root="$bundle/deps-root"
  if [ ! -d "$deps_root/usr/include/eigen3" ]; then
    mkdir -p "$deps_root"
    for f in "$bundle"/build-debs/*.deb; do dpkg -x "$f" "$deps_root"; done
  fi
  export CMAKE_PREFIX_PATH="$deps_root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$deps_root/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$deps_root/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
}

phase_env() {
  {
    date -u
    nvidia-smi || echo "nvidia-smi failed"
    nvcc --version | tail -2
    grep -h "define CUDNN_MAJOR\|define CUDNN_MINOR\|define CUDNN_PATCHLEVEL" /usr/include/cudnn_version*.h \
      /usr/local/cuda/include/cudnn_version*.h 2>/dev/null
    grep -h "define NCCL_MAJOR\|define NCCL_MINOR" /usr/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null
    cmake --version | head -1
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
    mpirun --version | head -1
    nproc
  } >"$OUT/env.txt" 2>&1
}

phase_build() {
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKOLO_WITH_CUDA=ON \
    -DKOLO_BUILD_FUZZERS=OFF >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; return 1; }
  # Only what `ctest -L gpu` and the benchmarks run (plus their libraries).
  ninja -C "$build" -j "$(nproc)" kolo_gpu_tests kolo_gpu_mpi_tests kolo-test-gpu-scenario kolo_gpu_nn_tests \
    kolo_gpu_nn_mpi_tests kolo-bench-gpu kolo-bench-train >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; return 1; }
}

phase_test() {
  (cd "$build" && ctest -L gpu --output-on-failure) >"$OUT/ctest-gpu.log" 2>&1
  local rc=$?
  grep -E "tests passed|Skipped|Failed|\*\*\*" "$OUT/ctest-gpu.log" | tail -30
  return $rc
}

phase_bench() {
  local rc=0
  "$build/bench/kolo-bench-gpu" --csv "$OUT/gpu_bench.csv" >"$OUT/gpu_bench.log" 2>&1 || rc=1
  tail -30 "$OUT/gpu_bench.log"
  "$root/bench/gpu_vs_pytorch.sh" "$build" "$OUT/train" 2>&1 | tee "$OUT/gpu_vs_pytorch.log" || rc=1
  return $rc
}

phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(env build test bench)
setup_env || { echo "env setup failed" >>"$summary"; exit 1; }
status=0
for p in "${phases[@]}"; do
  case $p in env|build|test|bench) ;; *) echo "gpu-session: unknown phase $p (env build test bench)" >&2; exit 2 ;; esac
  start=$(date +%s)
  echo "== $p" >&2
  "phase_$p"
  rc=$?
  echo "$p rc=$rc seconds=$(( $(date +%s) - start ))" | tee -a "$summary" >&2
  [ $rc -eq 0 ] || status=1
done
exit $status
