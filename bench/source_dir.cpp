// bench/ as CMake configured it (PTRAIN_BENCH_DIR): the one translation unit compiled with the
// checkout's path, so that the benchmarks' objects hold none and the compiler cache (with base_dir,
// scripts/env.sh) serves them to a clone in another folder.
#include "torch_peer.hpp"

const char* bench::source_dir() { return PTRAIN_BENCH_DIR; }
