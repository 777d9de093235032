#pragma once
// Elementwise loops over CPU tensors, spread over the threads when the tensor is large
// enough for it to pay (below ~32K elements a fork costs more than the loop).
#include <algorithm>
#include <cstdint>
#include <vector>

#include <Eigen/Core>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "ptrain/tensor/tensor.hpp"

namespace ptrain::kernels {

inline constexpr std::int64_t parallel_threshold = 32768;

namespace detail {
// n elements at p as an Eigen array: expressions over it vectorise (a plain float loop may not
// reorder its adds).
template <class T>
Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> array_of(T* p, std::int64_t n) {
  return {p, n};
}
template <class T>
Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> array_of(const T* p, std::int64_t n) {
  return {p, n};
}
}  // namespace detail

namespace detail {
// body(begin, end) over [0, n) cut into one contiguous range per thread (one range when the
// n x item_cost elements are few). Each range is a loop of its own over values it owns, so it vectorises: the same loop
// inside `omp parallel for` reads the functor through the region's shared data on every
// iteration, which stops GCC vectorising it (dropout's hash ran scalar so).
template <class Body>
void parallel_ranges(std::int64_t n, Body body, std::int64_t item_cost = 1) {
  if (n * item_cost < parallel_threshold || n < 2) {
    body(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
#if defined(_OPENMP)
    const std::int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
#else
    const std::int64_t t = 0, count = 1;
#endif
    const std::int64_t per = (n + count - 1) / count, begin = std::min(n, t * per);
    Body own = body;  // the thread's copy: its captures are then locals, not shared data
    own(begin, std::min(n, begin + per));
  }
}
}  // namespace detail

// out[i] = f(in[i])
template <class T, class F>
void map(const T* in, T* out, std::int64_t n, F f) {
  detail::parallel_ranges(n, [in, out, f](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
}
// out[i] = f(a[i], b[i])
template <class T, class F>
void map2(const T* a, const T* b, T* out, std::int64_t n, F f) {
  detail::parallel_ranges(n, [a, b, out, f](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
  });
}
// out[i] = f(i, in[i]): for bodies that depend on the position (dropout's mask).
template <class T, class F>
void map_indexed(const T* in, T* out, std::int64_t n, F f) {
  detail::parallel_ranges(n, [in, out, f](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[i] = f(static_cast<std::uint64_t>(i), in[i]);
  });
}

// The sum of f(i) over [0, n) in double, in fixed blocks added in order: the same result
// whatever the thread count.
template <class F>
double sum_indexed(std::int64_t n, F f) {
  constexpr std::int64_t block = 4096;
  const std::int64_t blocks = (n + block - 1) / block;
  std::vector<double> partial(static_cast<std::size_t>(blocks), 0.0);
#pragma omp parallel for if (n >= parallel_threshold) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    double s = 0;
    for (std::int64_t i = b * block, end = std::min(n, i + block); i < end; ++i) s += static_cast<double>(f(i));
    partial[static_cast<std::size_t>(b)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

template <class T, class F>
Tensor<T> map(const Tensor<T>& x, F f) {
  Tensor<T> out(x.shape());
  map(x.data(), out.data(), x.numel(), f);
  return out;
}
template <class T, class F>
Tensor<T> map2(const Tensor<T>& a, const Tensor<T>& b, F f) {
  check(a.shape() == b.shape(), "elementwise: shapes ", a.shape(), " and ", b.shape(), " differ");
  Tensor<T> out(a.shape());
  map2(a.data(), b.data(), out.data(), a.numel(), f);
  return out;
}

}  // namespace ptrain::kernels
