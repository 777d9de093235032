#!/usr/bin/env bash
# Installs the Debian 12 packages ptrain's build, tests and demo need, only those missing:
# a machine that has them all returns at once, without apt-get update.
set -euo pipefail

packages=(
  cmake g++ make ninja-build   # the build (Ninja where a script makes a new build folder: env.sh)
  ccache                       # the compiler cache (scripts/env.sh); the scripts build without it too
  libeigen3-dev                # CPU tensor math
  libopenblas-dev              # fast GEMM (about 1.6x Eigen's own on 2 cores)
  zlib1g-dev                   # gzip'd IDX datasets
  libboost-test-dev            # the tests
  mpich libmpich-dev           # the multi-process component ptrain::mpi
  dataset-fashion-mnist        # the demo's data, in /usr/share/datasets/fashion-mnist
  libpng-dev libjpeg-dev       # image datasets
  libsentencepiece-dev         # SentencePiece tokenization (ALBERT's spiece.model): ptrain::sentencepiece
  python3 python3-venv         # a venv for TensorBoard's own reader of the event files (test.sh)
  python3-matplotlib           # the sweeps' plots (tools/sweep.py, tools/hyper_sweep.py) and their tests
)

missing=()
for package in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)" != "installed" ]; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages present"
  exit 0
fi

echo "setup: missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: not root; install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup: installed ${missing[*]}"
