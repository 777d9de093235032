# Sourced by the build scripts (test.sh, demo.sh, ci_portable.sh, ci_sanitize.sh). nvcc on PATH
# when the CUDA toolkit sits in /usr/local/cuda; the build's job count (PTRAIN_JOBS overrides the
# core count); OpenBLAS's kernel set where its own choice is the fallback; ccache as the compilers' launcher where it is installed (PTRAIN_CCACHE=0 declines).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs=${PTRAIN_JOBS:-$(nproc)}

# The generator of a new build folder (test.sh's, demo.sh's, the jobs'): Ninja where it is
# installed (setup.sh installs it), else CMake's default, Unix Makefiles. Make does not start a
# target's compiles until every target it links is built, so a core waits at the libraries' and
# programs' links; Ninja holds only the link.
# From an empty cache, the same tree and host: the main build 1,413 -> 1,310 s, the sanitizer job
# 298 -> 223 s, the portable job 349 -> 271 s, .ci/run 2,655 -> 2,398 s after its setup.
# A folder configured before keeps the generator it has (CMake refuses another).
# Usage: cmake -S . -B DIR $(generator_for DIR) ...
generator_for() {
  if [ ! -f "$1/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then echo -GNinja; fi
}

# OpenBLAS's kernels for this CPU. Debian 12's OpenBLAS (0.3.21) picks its kernel set from the CPU
# model when it loads and takes Prescott's (SSE3) for a model it does not know, as it does on a
# virtual "Intel Xeon Processor" with AVX-512 and AMX: its 2048^3 float GEMM ran at 26 GFLOP/s on
# two threads there, against 188 with SkylakeX's. Where OPENBLAS_CORETYPE is unset and OpenBLAS
# reports Prescott's on a CPU with AVX-512 (F, BW, DQ, VL) or AVX2 and FMA, the tests and demos get
# SkylakeX's or Haswell's (PTRAIN_OPENBLAS_CORETYPE=keep leaves OpenBLAS's own choice). A user's
# program that leaves the variable unset runs Eigen's float GEMM there instead of Prescott's
# (kernels::blas_below_build in kernels/cpu/gemm.hpp; docs/benchmarks.md).
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ "${PTRAIN_OPENBLAS_CORETYPE:-}" != keep ]; then
  openblas_core=$(python3 -c 'import ctypes; lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p; print(lib.openblas_get_corename().decode())' 2>/dev/null || true)
  if [ "$openblas_core" = Prescott ]; then
    cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    has_flags() { for flag; do case "$cpu_flags" in *" $flag "*) ;; *) return 1 ;; esac; done; }
    if has_flags avx512f avx512bw avx512dq avx512vl; then
      export OPENBLAS_CORETYPE=SkylakeX
    elif has_flags avx2 fma; then
      export OPENBLAS_CORETYPE=Haswell
    fi
    [ -z "${OPENBLAS_CORETYPE:-}" ] || echo "env.sh: OpenBLAS took Prescott's kernels on this CPU; OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE for the tests" >&2
    unset -f has_flags
  fi
fi

# The compiler cache. CMake (3.17+) takes CMAKE_<LANG>_COMPILER_LAUNCHER from the environment at
# the first configure of a build folder, so every build these scripts start uses it.
# - The cache lives outside the clone (~/.cache/ccache unless CCACHE_DIR says otherwise), so a new
#   clone starts with what the last build compiled.
# - base_dir is this checkout: paths under it are hashed relative to the compiler's folder, so a
#   clone elsewhere (CI's) hits what the working copy compiled. hash_dir off: -g (the sanitizer
#   job's -g1) would otherwise put the absolute build folder into every key.
# - -march=native is hashed as written, not as the CPU it resolves to, so an object built on an
#   AVX-512 host could be handed to an AVX2-only one. The compiler's resolved target options
#   (-Q --help=target: -march=znver4, each -m flag on or off) go into a file named after their
#   hash, and CCACHE_EXTRAFILES adds that file's contents to every key: another CPU, another key.
# - Depend mode: on a miss the include list comes from the compiler's -MD file (CMake asks for one
#   on every compile, nvcc's included) instead of a preprocessor run before the compile, so a cold
#   build costs what it costs without ccache: the header checks from an empty cache took 219-223 s
#   against 263-291 s in the default mode and 226 s with ccache off. Hits are the direct mode's, as
#   before; what is lost is the preprocessor mode's (a header edited without changing its
#   preprocessed text now recompiles what includes it).
ccache_stats_before=""
if [ "${PTRAIN_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 CCACHE_DEPEND=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-25G}
  mkdir -p "$CCACHE_DIR"
  host_target=$("${CXX:-c++}" -march=native -Q --help=target 2>/dev/null || true)
  host_target_file="$CCACHE_DIR/host-target-$(printf '%s' "$host_target" | md5sum | cut -c1-16).txt"
  [ -f "$host_target_file" ] || printf '%s\n' "$host_target" >"$host_target_file"
  export CCACHE_EXTRAFILES=$host_target_file
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  ccache_stats_before=$(ccache --print-stats 2>/dev/null || true)
fi

# "ccache: N of M compilations from the cache (P%)" since this script sourced env.sh; empty
# without ccache.
ccache_summary() {
  [ -n "$ccache_stats_before" ] || return 0
  local after
  after=$(ccache --print-stats 2>/dev/null) || return 0
  awk -v before="$ccache_stats_before" '
    BEGIN { n = split(before, lines, "\n"); for (i = 1; i <= n; i++) { split(lines[i], f, "\t"); old[f[1]] = f[2] } }
    { now[$1] = $2 }
    END {
      hits = (now["direct_cache_hit"] - old["direct_cache_hit"]) + (now["preprocessed_cache_hit"] - old["preprocessed_cache_hit"])
      misses = now["cache_miss"] - old["cache_miss"]
      total = hits + misses
      printf "ccache: %d of %d compilations from the cache (%s) in %s\n", hits, total,
             total ? sprintf("%.0f%%", 100 * hits / total) : "no compilations", ENVIRON["CCACHE_DIR"]
    }' FS='\t' <<<"$after"
}
