#pragma once
// How many threads the CPU ops use: all cores by default, PTRAIN_NUM_THREADS overrides,
// set_num_threads() overrides both. All parallelism is OpenMP's: BLAS runs single-threaded
// inside our parallel regions, because OpenBLAS's own thread pool and OpenMP's spinning workers
// fight over the cores (measured: 15% of a small CNN's step spent spinning in libgomp).
#include <cstdlib>
#include <string>
#include <thread>

#include <Eigen/Core>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "ptrain/core/error.hpp"

// OpenBLAS's own thread setter, when the program links OpenBLAS; weak, so linking is optional.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace ptrain {

namespace detail {
inline int& thread_count() {
  static int count = 0;
  return count;
}
inline int threads_from_environment() {
  if (const char* env = std::getenv("PTRAIN_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    check(end && *end == '\0' && n > 0 && n <= 4096, "PTRAIN_NUM_THREADS='", env,
          "': expected a positive integer");
    return static_cast<int>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}
}  // namespace detail

// The thread count of OpenBLAS's own pool (kept at 1: see above).
inline void set_blas_threads(int n) {
  if (openblas_set_num_threads) openblas_set_num_threads(n);
}

inline void set_num_threads(int n) {
  check(n > 0, "set_num_threads: expected a positive count, got ", n);
  detail::thread_count() = n;
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
  Eigen::setNbThreads(n);
  set_blas_threads(1);
}

inline int num_threads() {
  if (detail::thread_count() == 0) set_num_threads(detail::threads_from_environment());
  return detail::thread_count();
}

// The calling thread's place in its OpenMP team, and the team's size (0 and 1 outside one).
inline int thread_index() {
#if defined(_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}
inline int team_size() {
#if defined(_OPENMP)
  return omp_get_num_threads();
#else
  return 1;
#endif
}

}  // namespace ptrain
