#!/usr/bin/env bash
# Installs the Debian packages kolo needs to build, test and train, when they are missing.
# Safe to run repeatedly: it does nothing when every package is already present.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      openmpi-bin libopenmpi-dev libeigen3-dev catch2 zlib1g-dev
      libcli11-dev nlohmann-json3-dev dataset-fashion-mnist python3
      python3-matplotlib   # the timeline test draws its trace (tools/timeline_plot.py)
      python3-dev python3-pybind11 pybind11-dev python3-torch python3-pytest  # kolo.torch and its tests
      python3-pip python3-venv python3-setuptools python3-wheel  # pip install ./python (offline)
      libtorch-dev   # the LibTorch C++ adapter kolo::torch (adapters/torch)
      libgloo-dev libhiredis-dev redis-server  # the Gloo transport and its Redis rendezvous (docs/gloo.md)
      iproute2 rsync)  # simulated hosts (tools/hosts: ip netns, tc) and kolo-run --sync-dst-dir
# Optional extras (plots, the PyTorch baseline) are installed by the bench scripts that use them.
# `--main`: only what the main job needs (scripts/run-main.sh: the trainer), so that a new
# user's first training line does not wait for LibTorch, Python and the test tools.
main_pkgs=(build-essential cmake ninja-build pkg-config ccache
           openmpi-bin libopenmpi-dev libeigen3-dev catch2 zlib1g-dev
           libcli11-dev nlohmann-json3-dev dataset-fashion-mnist)
pkgs+=(ccache)  # builds reuse what an earlier build of the same sources compiled
[ "${1:-}" = "--main" ] && pkgs=("${main_pkgs[@]}")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
