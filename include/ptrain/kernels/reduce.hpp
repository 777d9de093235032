#pragma once
// The dispatch points of the reductions (autograd/ops/reduce.hpp, linear's bias gradient, the
// gradients of broadcast ops), the executor first: CpuExecutor reaches Eigen's vectorised sums,
// any other executor kernels/indexed/reduce.hpp. Results stay in the executor's memory.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"

namespace ptrain::kernels {

// out[0] = factor * sum(x[0, n)), summed in double: sum and mean.
template <class T>
void sum_all(const CpuExecutor&, const T* x, std::int64_t n, double factor, T* out) {
  ProfiledOp profiled("reduce");
  const double total = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, n).template cast<double>().sum();
  out[0] = static_cast<T>(total * factor);
}
template <class Ex, class T>
void sum_all(const Ex& ex, const T* x, std::int64_t n, double factor, T* out) {
  indexed::sum_all(ex, x, n, factor, out);
}

// out[i] = factor * g[0] for i < n, g a scalar in the executor's memory: the backward of a
// reduction to a scalar.
template <class T>
void fill_scaled_scalar(const CpuExecutor&, const T* g, double factor, T* out, std::int64_t n) {
  ProfiledOp profiled("reduce");
  std::fill_n(out, n, static_cast<T>(static_cast<double>(g[0]) * factor));
}
template <class Ex, class T>
void fill_scaled_scalar(const Ex& ex, const T* g, double factor, T* out, std::int64_t n) {
  ex.indexed(n, indexed::BroadcastScaledScalar<T>{g, factor, out});
}

// out[c] = sum over r of x[r, c], x [rows, cols], in accumulate_t<T>: linear's bias gradient.
template <class T>
void column_sums(const CpuExecutor&, const T* x, std::int64_t rows, std::int64_t cols, T* out) {
  ProfiledOp profiled("reduce");
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(out, cols) = Eigen::Map<const Matrix>(x, rows, cols)
                                                                  .template cast<accumulate_t<T>>()
                                                                  .colwise()
                                                                  .sum()
                                                                  .transpose()
                                                                  .array()
                                                                  .template cast<T>();
}
template <class Ex, class T>
void column_sums(const Ex& ex, const T* x, std::int64_t rows, std::int64_t cols, T* out) {
  indexed::column_sums(ex, x, rows, cols, out);
}

// out[0] = the count of inf and NaN elements of x[0, n): once per parameter and step (the Trainer's
// check), so on the CPU one vectorised pass without a parallel region's start-up.
template <class T>
void count_non_finite(const CpuExecutor&, const T* x, std::int64_t n, double* out) {
  ProfiledOp profiled("reduce");
  out[0] = static_cast<double>((!Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, n).isFinite()).count());
}
template <class Ex, class T>
void count_non_finite(const Ex& ex, const T* x, std::int64_t n, double* out) {
  indexed::count_non_finite(ex, x, n, out);
}

// out[0] = the sum of x[0, n)'s squares, in double: a gradient's share of the global norm
// (train/clip_grad_norm.hpp). Fixed blocks, each summed in SIMD lanes, the blocks' sums added in
// order: the threads share the work and the result does not depend on their count.
template <class T>
void sum_of_squares(const CpuExecutor&, const T* x, std::int64_t n, double* out) {
  ProfiledOp profiled("reduce");
  constexpr std::int64_t block = std::int64_t(1) << 16;
  const std::int64_t blocks = (n + block - 1) / block;
  std::vector<double> partial(static_cast<std::size_t>(blocks), 0.0);
#pragma omp parallel for if (blocks > 1) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const T* xb = x + b * block;
    const std::int64_t count = std::min(block, n - b * block);
    double total = 0;
#pragma omp simd reduction(+ : total)
    for (std::int64_t i = 0; i < count; ++i) {
      const double v = static_cast<double>(xb[i]);
      total += v * v;
    }
    partial[static_cast<std::size_t>(b)] = total;
  }
  double total = 0;
  for (double v : partial) total += v;
  out[0] = total;
}
template <class Ex, class T>
void sum_of_squares(const Ex& ex, const T* x, std::int64_t n, double* out) {
  indexed::sum_of_squares(ex, x, n, out);
}

// The gradient of a broadcast operand: g summed over the dimensions it was broadcast along (no
// tuned CPU kernel: the indexed one runs on every executor).
using indexed::sum_to;

}  // namespace ptrain::kernels
