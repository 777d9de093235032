#!/usr/bin/env bash
# Installs what is missing, builds the Fashion-MNIST example (Release, in build/) and runs it.
# It trains data-parallel on PTRAIN_RANKS (default 2) MPI processes; arguments are passed on to
# build/examples/fashion_mnist (see its --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/env.sh

cmake -S . -B build $(generator_for build) -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs" --target fashion_mnist
exec mpiexec -n "${PTRAIN_RANKS:-2}" build/examples/fashion_mnist "$@"
