"""pip install of kolo's Python package (kolo.torch) from this source tree, without network.

    python3 -m venv --system-site-packages ENV      # Debian's torch, pybind11, setuptools
    ENV/bin/pip install --no-build-isolation --no-index ./python

(or, outside a venv, `pip install --user --break-system-packages ...`: Debian's pip refuses to
write into the system Python otherwise, PEP 668). `--no-build-isolation` makes pip use the
installed setuptools and wheel (python3-setuptools, python3-wheel) instead of downloading them;
`--no-index` keeps it from looking at PyPI at all. Nothing is declared as a dependency: torch
and MPI come from the system (python3-torch, libopenmpi-dev).

What it does: configures the whole kolo CMake project (the parent folder) in the build's
temporary folder for the interpreter running pip, with libkolo linked statically into the
extension (so the installed package does not depend on a build folder), builds the target
`kolo_python` only, and packages the extension with the .py files of kolo/. Environment:
KOLO_CMAKE_ARGS (extra -D options, split on spaces), KOLO_BUILD_JOBS (parallel jobs; default
the CPU count), KOLO_CMAKE_BUILD_DIR (the CMake build folder; default one in setuptools'
temporary build folder), CMAKE_GENERATOR (default Ninja when ninja is on PATH). ccache is used
when it is on PATH. Test: test/pip_install_test.sh (CTest install.pip).
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        for line in f:
            if line.startswith("project(kolo VERSION "):
                return line.split()[2]
    raise RuntimeError("kolo setup.py: no 'project(kolo VERSION x.y.z' line in %s/CMakeLists.txt" % ROOT)


class CMakeBuild(build_ext):
    """Builds kolo._kolo with kolo's own CMake project instead of setuptools' compiler."""

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("kolo setup.py: cmake is not on PATH (Debian: apt-get install cmake, "
                               "or run scripts/install-deps.sh)")
        build = os.path.abspath(os.environ.get("KOLO_CMAKE_BUILD_DIR") or os.path.join(self.build_temp, "kolo-cmake"))
        args = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
                "-DCMAKE_POSITION_INDEPENDENT_CODE=ON", "-DKOLO_BUILD_TESTS=OFF", "-DKOLO_BUILD_BENCH=OFF",
                "-DKOLO_BUILD_TRAINER=OFF", "-DKOLO_WITH_TORCH=OFF", "-DKOLO_BUILD_PYTHON=ON",
                "-DPython3_EXECUTABLE=" + sys.executable]
        if "CMAKE_GENERATOR" not in os.environ and shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        args += os.environ.get("KOLO_CMAKE_ARGS", "").split()
        self.announce("kolo: configuring %s in %s" % (ROOT, build), level=3)
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build] + args)
        jobs = os.environ.get("KOLO_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build, "--target", "kolo_python", "--parallel", jobs])
        built = glob.glob(os.path.join(build, "python", "kolo", "_kolo*.so"))
        if len(built) != 1:
            raise RuntimeError("kolo setup.py: expected one _kolo*.so under %s/python/kolo, found %s" %
                               (build, built or "none"))
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(
    name="kolo",
    version=project_version(),
    description="kolo: Horovod-style data-parallel training; kolo.torch is Horovod's PyTorch API",
    packages=["kolo", "kolo.torch"],
    ext_modules=[Extension("kolo._kolo", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
)
