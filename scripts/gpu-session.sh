#!/usr/bin/env bash
# One-shot GPU session for a lent GPU machine (CUDA, NCCL, cuDNN, CMake, ninja, PyTorch; no
# MPI, no package registry). Everything it measures goes to $OUT.
#
#   here (Debian, apt access), before each device session:   scripts/gpu-session.sh prepare
#       fetches Open MPI (/work/shared/tools/openmpi-bundle) and the header-only build
#       dependencies (Eigen, Catch2, CLI11, nlohmann-json, zlib headers) as .debs into
#       .ompi/ (git-ignored; ~11 MB). Carry `.ompi` with the run.
#   there, from the repository root:   scripts/gpu-session.sh [PHASE...]
#       PHASE: env build test bench (default: all four, in that order). Each phase appends
#       its log to $OUT and its status and seconds to $OUT/summary.txt; a failing phase
#       does not stop the next one. The build folder (build-gpu/) survives between calls
#       on a warm machine, so a 10-minute call limit is met by `env build` in one call,
#       `test` in the next and `bench` in a third (one hung test then costs only its call).
#       Run `prepare` (again) just before: it drops unpacked copies from .ompi, which would
#       otherwise push the carry past its limit.
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
  rm -rf "$bundle/root" "$bundle/bin" "$bundle/deps-root" "$bundle/compat"
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
# Debian 12's libevent_core (under Open MPI) needs GLIBC_2.36 for arc4random and
# arc4random_buf; on an older libc (Ubuntu 22.04: 2.35) nothing linked to Open MPI, i.e.
# every kolo binary, would load. There: mark that version reference weak in the unpacked
# libraries (ld.so then only warns) and preload a getrandom-based arc4random. Needs cc.
# KOLO_GLIBC_COMPAT=force applies it on any libc (to try it), =off never.
glibc_compat() {
  local mode="${KOLO_GLIBC_COMPAT:-auto}" have
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  [ "$mode" = off ] && return 0
  if [ "$mode" != force ]; then
    [ -n "$have" ] || return 0
    printf '2.36\n%s\n' "$have" | sort -V -C && return 0  # 2.36 or newer: nothing to do
  fi
  echo "gpu-session: libc ${have:-?}, Open MPI's libevent wants 2.36: weakening its GLIBC_2.36 references" >&2
  "$python" - "$bundle/root" <<'EOF' || return 1
import os, struct, sys
def weaken(path, version=b"GLIBC_2.36"):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return 0
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    changed = 0
    for sec in secs:
        if sec[1] != 0x6ffffffe:  # SHT_GNU_verneed: sh_offset sec[4], strings sec[6], entries sec[7]
            continue
        strings = secs[sec[6]][4]
        at = sec[4]
        for _ in range(sec[7]):
            _, cnt, _, aux, nxt = struct.unpack_from("<HHIII", data, at)
            a = at + aux
            for _ in range(cnt):
                _, flags, _, name, anext = struct.unpack_from("<IHHII", data, a)
                if data[strings + name:data.index(b"\0", strings + name)] == version and not flags & 2:
                    struct.pack_into("<H", data, a + 4, flags | 2)  # VER_FLG_WEAK
                    changed += 1
                a += anext
            at += nxt
    if changed:
        with open(path, "wb") as f:
            f.write(data)
    return changed
for d, _, files in os.walk(sys.argv[1]):
    for n in files:
        p = os.path.join(d, n)
        if ".so" in n and os.path.isfile(p) and not os.path.islink(p) and weaken(p):
            print("weakened GLIBC_2.36 in", p, file=sys.stderr)
EOF
  local shim="$bundle/compat/libkolo_arc4random.so"
  mkdir -p "$bundle/compat"
  "${CC:-$(command -v cc || command -v gcc)}" -shared -fPIC -O2 -o "$shim" -x c - <<'EOF' || return 1
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>
void arc4random_buf(void* buf, size_t n) {
  char* p = buf;
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got > 0) { p += got; n -= (size_t)got; }
  }
}
uint32_t arc4random(void) { uint32_t v; arc4random_buf(&v, sizeof v); return v; }
uint32_t arc4random_uniform(uint32_t bound) {
  if (bound < 2) return 0;
  const uint32_t min = -bound % bound;
  for (;;) { const uint32_t r = arc4random(); if (r >= min) return r % bound; }
}
EOF
  export LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}"
}

setup_env() {
  [ -x "$bundle/openmpi-bundle" ] || { echo "gpu-session: no bundle at $bundle (run 'prepare' first and carry .ompi)" >&2; return 1; }
  # shellcheck disable=SC1090
  source <("$bundle/openmpi-bundle" env "$bundle")
  glibc_compat || { echo "gpu-session: the glibc compatibility step failed" >&2; return 1; }
  local deps_root="$bundle/deps-root"
  if [ ! -d "$deps_root/usr/include/eigen3" ]; then
    mkdir -p "$deps_root"
    for f in "$bundle"/build-debs/*.deb; do dpkg -x "$f" "$deps_root"; done
  fi
  # zlib1g-dev's libz.so is an absolute link to Debian's libz.so.1.2.13, which another
  # distribution may not have: point it at this machine's libz.so.1, or drop it (libz.a).
  local zlink="$deps_root/usr/lib/x86_64-linux-gnu/libz.so"
  if [ -L "$zlink" ] && [ ! -e "$zlink" ]; then
    rm -f "$zlink"
    for z in /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1 /usr/lib64/libz.so.1; do
      if [ -e "$z" ]; then ln -s "$z" "$zlink"; break; fi
    done
  fi
  export CMAKE_PREFIX_PATH="$deps_root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$deps_root/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$deps_root/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
}

phase_env() {
  {
    date -u
    grep -h "^PRETTY_NAME" /etc/os-release; getconf GNU_LIBC_VERSION
    nvidia-smi || echo "nvidia-smi failed"
    nvcc --version | tail -2
    grep -h "define CUDNN_MAJOR\|define CUDNN_MINOR\|define CUDNN_PATCHLEVEL" /usr/include/cudnn_version*.h \
      /usr/local/cuda/include/cudnn_version*.h 2>/dev/null
    grep -h "define NCCL_MAJOR\|define NCCL_MINOR" /usr/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null
    cmake --version | head -1
    "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
    ldconfig -p 2>/dev/null | grep -E "libnccl|libcudnn\.|libz\.so" || echo "ldconfig: no libnccl/libcudnn/libz"
    echo "NCCL/cuDNN wheel hints: $(wheel_hints)"
    mpirun --version | head -1
    nproc
  } >"$OUT/env.txt" 2>&1
}

# "-DKOLO_NCCL_LIBRARY=... -DKOLO_NCCL_INCLUDE=..." (and cuDNN's) for NCCL/cuDNN that exist
# only inside Python wheels (nvidia-nccl-cu*, nvidia-cudnn-cu*, as pip installs PyTorch's);
# empty when there are none.
wheel_hints() {
  "$python" - <<'EOF' 2>/dev/null
import glob, os
out = []
for pkg, lib, hdr in (("nccl", "libnccl.so*", "nccl.h"), ("cudnn", "libcudnn.so*", "cudnn.h")):
    try:
        base = list(__import__("nvidia." + pkg, fromlist=["_"]).__path__)[0]
    except Exception:
        continue
    libs = sorted(glob.glob(os.path.join(base, "lib", lib)))
    inc = os.path.join(base, "include")
    if libs and os.path.exists(os.path.join(inc, hdr)):
        out += ["-DKOLO_%s_LIBRARY=%s" % (pkg.upper(), libs[0]), "-DKOLO_%s_INCLUDE=%s" % (pkg.upper(), inc)]
print(" ".join(out))
EOF
}

phase_build() {
  local cfg=(cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKOLO_WITH_CUDA=ON -DKOLO_BUILD_FUZZERS=OFF)
  if ! "${cfg[@]}" >"$OUT/configure.log" 2>&1; then
    local hints
    read -r -a hints <<<"$(wheel_hints)"
    [ ${#hints[@]} -gt 0 ] || { tail -30 "$OUT/configure.log"; return 1; }
    echo "gpu-session: configure failed; again with NCCL/cuDNN from Python wheels: ${hints[*]}" | tee -a "$OUT/configure.log" >&2
    "${cfg[@]}" "${hints[@]}" >>"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; return 1; }
  fi
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
  PYTHON="$python" "$root/bench/gpu_vs_pytorch.sh" "$build" "$OUT/train" 2>&1 | tee "$OUT/gpu_vs_pytorch.log" || rc=1
  return $rc
}

# Python (PyTorch) runs outside the bundle's library path, so that Debian's libraries
# (libnuma, libibverbs, ...) never shadow the image's own in the python process.
python="${TMPDIR:-/tmp}/kolo-gpu-session-python3"
printf '#!/usr/bin/env bash\nLD_LIBRARY_PATH=%q exec python3 "$@"\n' "${LD_LIBRARY_PATH-}" >"$python"
chmod +x "$python"

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
