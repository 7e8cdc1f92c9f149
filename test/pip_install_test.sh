#!/usr/bin/env bash
# `pip install` of kolo's Python package from source dir $1, offline, as python/setup.py
# documents it: a venv that sees Debian's torch/pybind11/setuptools, pip with
# --no-build-isolation --no-index; then kolo.torch from that venv (not from the source tree)
# runs an allreduce and a join under mpirun -np 2. $2: a CMake build folder to (re)use, so a
# second run only relinks. Built at -O0 to keep the test short. Extra args go to mpirun.
# Each rank records its success in a file and this script prints the verdict once: two
# ranks' lines on mpirun's stdout can interleave mid-line (a CI run printed "rankpip install
# test: rank 0 ok ... 1 ok"), which a regex over the output cannot survive.
set -euo pipefail
src=$1; cmake_dir=$2; shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
KOLO_CMAKE_BUILD_DIR="$cmake_dir" KOLO_BUILD_JOBS=2 \
  KOLO_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Debug -DKOLO_WITH_CUDA=OFF" \
  "$work/venv/bin/pip" install -q --no-build-isolation --no-index --no-cache-dir "$src/python"
cd "$work"  # nothing named kolo here: the import must come from the venv
mpirun -np 2 "$@" "$work/venv/bin/python" -c "
import sys, torch, kolo.torch as hvd
assert hvd.__file__.startswith(sys.prefix), ('kolo.torch from', hvd.__file__, 'not the venv', sys.prefix)
hvd.init()
x = hvd.allreduce(torch.full((4,), float(hvd.rank() + 1)), op=hvd.Sum, name='pip.x')
assert x.tolist() == [3.0] * 4, x
assert hvd.join() == hvd.size() - 1 or hvd.size() == 1
open('ok.%d' % hvd.rank(), 'w').write(hvd.__file__ + '\\n')
"
for r in 0 1; do
  [ -s "$work/ok.$r" ] || { echo "pip install test: rank $r did not finish" >&2; exit 1; }
done
echo "pip install test: ranks 0 and 1 ok, kolo.torch from $(cat "$work/ok.1")"
