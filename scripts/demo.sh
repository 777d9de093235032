#!/usr/bin/env bash
# Installs what is missing, builds the Fashion-MNIST example (Release, in build/) and runs it.
# Arguments are passed on to build/examples/fashion_mnist.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs" --target fashion_mnist
exec build/examples/fashion_mnist "$@"
