#!/usr/bin/env bash
# Builds the runtime and its tests under a sanitizer preset and runs them (no trainer, no
# benchmarks: they add build time but no runtime code). CI runs the ASan+UBSan preset.
# Usage: scripts/sanitize.sh [asan|tsan] [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-asan}; shift || true
case "$preset" in asan|tsan) ;; *) echo "sanitize.sh: unknown preset '$preset' (asan, tsan)" >&2; exit 2;; esac
scripts/install-deps.sh
# The Python module and the LibTorch adapter stay out: an instrumented extension cannot load
# into an uninstrumented python3, and LibTorch adds minutes of build for no runtime code.
launcher=()
if command -v ccache >/dev/null 2>&1; then  # as scripts/build.sh: a rebuild of the same sources is quick
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake --preset "$preset" "${launcher[@]}" -DKOLO_BUILD_TRAINER=OFF -DKOLO_BUILD_BENCH=OFF -DKOLO_WITH_TORCH=OFF -DKOLO_BUILD_PYTHON=OFF >/dev/null
cmake --build "build-$preset" -j "$(nproc)"
ctest --preset "$preset" --timeout 600 "$@"
