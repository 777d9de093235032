# Sourced by demo.sh and test.sh. nvcc on PATH when the CUDA toolkit sits in /usr/local/cuda;
# the build's job count (PTRAIN_JOBS overrides the core count).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs=${PTRAIN_JOBS:-$(nproc)}
