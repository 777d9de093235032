#pragma once
// Index-space kernels: a GPU kernel's body written once as a host-device functor. On a GPU
// kernels/cuda/launch.cuh runs it over a grid; here on the CPU the serial loops below run the
// very same functor, which is how the tests check the GPU arithmetic on a machine without one.
//
// Two shapes of kernel:
//   indexed       f(i) for every i in [0, n): one thread per output element (or per input
//                 element, scattering with atomic_add).
//   row reduction rows x length terms folded per row: f.identity(), f.term(row, j),
//                 f.combine(a, b) (associative; the GPU folds in a tree, the CPU in order) and
//                 f.finish(row, total), which writes the row's result. A GPU block per row.
#include <concepts>
#include <cstdint>
#include <cstring>

#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace ptrain::kernels {

template <class F>
concept IndexedKernel = std::copy_constructible<F> && requires(const F& f, std::int64_t i) { f(i); };

template <class F>
concept RowReduction = std::copy_constructible<F> && requires(const F& f, std::int64_t row, std::int64_t j) {
  typename F::accumulator;
  { f.identity() } -> std::convertible_to<typename F::accumulator>;
  { f.term(row, j) } -> std::convertible_to<typename F::accumulator>;
  { f.combine(f.identity(), f.identity()) } -> std::convertible_to<typename F::accumulator>;
  f.finish(row, f.identity());
};

// The CPU runners: serial on purpose (the functors may scatter with atomic_add, which is a
// plain += on the host), for checking arithmetic, not for speed.
template <IndexedKernel F>
void run_indexed(std::int64_t n, const F& f) {
  for (std::int64_t i = 0; i < n; ++i) f(i);
}
template <RowReduction F>
void run_row_reduction(std::int64_t rows, std::int64_t length, const F& f) {
  for (std::int64_t row = 0; row < rows; ++row) {
    auto total = f.identity();
    for (std::int64_t j = 0; j < length; ++j) total = f.combine(total, f.term(row, j));
    f.finish(row, total);
  }
}

// A row reduction that sums (the common case): derive and define term and finish.
template <class A>
struct SumReduction {
  using accumulator = A;
  PTRAIN_HOST_DEVICE A identity() const { return A(0); }
  PTRAIN_HOST_DEVICE A combine(A a, A b) const { return a + b; }
};

// *p += v, atomically on a GPU (several threads may scatter into one element).
template <class T>
PTRAIN_HOST_DEVICE void atomic_add(T* p, T v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(p, v);
#else
  *p += v;
#endif
}

// Scalars in kernels: values are loaded widened to accumulate_t<T> (float for half and
// bfloat16) and rounded once on store. Eigen's 16-bit conversions are host code here (ptrain
// compiles Eigen with EIGEN_NO_CUDA), so on a GPU the bits go through CUDA's own types.
template <class T>
PTRAIN_HOST_DEVICE accumulate_t<T> to_accumulate(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, half>) {
    __half_raw raw;
    std::memcpy(&raw.x, &x, sizeof raw.x);
    return __half2float(__half(raw));
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    __nv_bfloat16_raw raw;
    std::memcpy(&raw.x, &x, sizeof raw.x);
    return __bfloat162float(__nv_bfloat16(raw));
  } else {
    return x;
  }
#else
  return static_cast<accumulate_t<T>>(x);
#endif
}
template <class T>
PTRAIN_HOST_DEVICE T from_accumulate(accumulate_t<T> a) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, half>) {
    const __half_raw raw = __float2half_rn(a);
    T out;
    std::memcpy(&out, &raw.x, sizeof out);
    return out;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    const __nv_bfloat16_raw raw = __float2bfloat16_rn(a);
    T out;
    std::memcpy(&out, &raw.x, sizeof out);
    return out;
  } else {
    return a;
  }
#else
  return static_cast<T>(a);
#endif
}

}  // namespace ptrain::kernels
