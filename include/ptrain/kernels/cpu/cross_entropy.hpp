#pragma once
// Fused log-softmax + negative log-likelihood with label smoothing eps over class scores seen
// as [outer, C, inner] (C = layout.n). Per position, with L = logsumexp(x):
//   loss  = (1 - eps) (L - x_t) + eps/C sum_c (L - x_c) = L - (1 - eps) x_t - eps/C sum_c x_c
//   dloss/dx_c = exp(x_c - L) - (1 - eps) [c == t] - eps/C
// Forward keeps only L per position; backward recomputes exp(x - L) from the input, which
// costs less memory traffic than storing and rereading the log-probabilities.
// half and bfloat16 scores are widened to float, a block of rows at a time: L, the loss and the
// gradient are float math (L is kept in float), the gradient rounded once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "ptrain/kernels/cpu/softmax.hpp"
#include "ptrain/kernels/cpu/widen.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

// Writes L for every position into lse ([outer * inner]) and returns the summed loss.
template <class T>
double cross_entropy_forward(const T* x, const std::int64_t* targets, T* lse, const ReductionLayout& l,
                             double eps) {
  const std::int64_t C = l.n, inner = l.inner;
  const double on_target = 1.0 - eps, per_class = eps / static_cast<double>(C);
  // Per-outer partial sums, added in order afterwards: the result does not depend on threads.
  std::vector<double> partial(static_cast<std::size_t>(l.outer), 0.0);
  if (inner == 1) {
#pragma omp parallel for if (l.numel() >= parallel_threshold && l.outer > 1) schedule(static)
    for (std::int64_t r = 0; r < l.outer; ++r) {
      Eigen::Map<const detail::Vec<T>> xr(x + r * C, C);
      const T max = xr.maxCoeff();
      const T L = max + std::log((xr - max).exp().sum());
      lse[r] = L;
      double loss = static_cast<double>(L) - on_target * static_cast<double>(xr[targets[r]]);
      if (eps != 0.0) loss -= per_class * static_cast<double>(xr.sum());
      partial[static_cast<std::size_t>(r)] = loss;
    }
  } else {
#pragma omp parallel if (l.numel() >= parallel_threshold && l.outer > 1)
    {
      detail::RowVec<T> sum(inner), total(inner);
#pragma omp for schedule(static)
      for (std::int64_t o = 0; o < l.outer; ++o) {
        const T* xb = x + o * C * inner;
        auto row = [&](std::int64_t c) { return Eigen::Map<const detail::RowVec<T>>(xb + c * inner, inner); };
        Eigen::Map<detail::RowVec<T>> L(lse + o * inner, inner);
        L = row(0);
        for (std::int64_t c = 1; c < C; ++c) L = L.max(row(c));
        sum.setZero();
        for (std::int64_t c = 0; c < C; ++c) sum += (row(c) - L).exp();
        L += sum.log();
        if (eps != 0.0) {
          total.setZero();
          for (std::int64_t c = 0; c < C; ++c) total += row(c);
        }
        const std::int64_t* t = targets + o * inner;
        double loss = 0;
        for (std::int64_t k = 0; k < inner; ++k) {
          loss += static_cast<double>(L[k]) - on_target * static_cast<double>(xb[t[k] * inner + k]);
          if (eps != 0.0) loss -= per_class * static_cast<double>(total[k]);
        }
        partial[static_cast<std::size_t>(o)] = loss;
      }
    }
  }
  double loss = 0;
  for (double v : partial) loss += v;
  return loss;
}

// gx = scale * dloss/dx, from the input x and the L written by the forward pass.
template <class T>
void cross_entropy_backward(const T* x, const std::int64_t* targets, const T* lse, T scale, T* gx,
                            const ReductionLayout& l, double eps) {
  const std::int64_t C = l.n, inner = l.inner;
  const T on_target = static_cast<T>(1.0 - eps) * scale;
  const T per_class = static_cast<T>(eps / static_cast<double>(C));
  if (inner == 1) {
#pragma omp parallel for if (l.numel() >= parallel_threshold && l.outer > 1) schedule(static)
    for (std::int64_t r = 0; r < l.outer; ++r) {
      Eigen::Map<const detail::Vec<T>> xr(x + r * C, C);
      Eigen::Map<detail::Vec<T>> gr(gx + r * C, C);
      gr = ((xr - lse[r]).exp() - per_class) * scale;
      gr[targets[r]] -= on_target;
    }
    return;
  }
#pragma omp parallel for if (l.numel() >= parallel_threshold && l.outer > 1) schedule(static)
  for (std::int64_t o = 0; o < l.outer; ++o) {
    const std::int64_t base = o * C * inner;
    Eigen::Map<const detail::RowVec<T>> L(lse + o * inner, inner);
    for (std::int64_t c = 0; c < C; ++c) {
      Eigen::Map<const detail::RowVec<T>> xc(x + base + c * inner, inner);
      Eigen::Map<detail::RowVec<T>> gc(gx + base + c * inner, inner);
      gc = ((xc - L).exp() - per_class) * scale;
    }
    const std::int64_t* t = targets + o * inner;
    for (std::int64_t k = 0; k < inner; ++k) gx[base + t[k] * inner + k] -= on_target;
  }
}

// The 16-bit types: the float kernels on widened scores, over the last dimension a block of rows
// at a time in a thread's buffers (over_row_blocks; the loss summed per block, the blocks' sums
// in order), over inner ones on a whole widened copy.
template <class T>
  requires is_reduced_float_v<T>
double cross_entropy_forward(const T* x, const std::int64_t* targets, float* lse, const ReductionLayout& l,
                             double eps) {
  if (l.inner != 1) return cross_entropy_forward(widen(x, l.numel()).data(), targets, lse, l, eps);
  std::vector<double> block_loss(static_cast<std::size_t>(l.outer), 0.0);  // at each block's first row
  over_row_blocks(l.outer, l.n, [&](std::int64_t first, std::int64_t rows, auto buffer) {
    float* block = buffer(0);
    convert_run(x + first * l.n, rows * l.n, block);
    block_loss[static_cast<std::size_t>(first)] = cross_entropy_forward(
        static_cast<const float*>(block), targets + first, lse + first, ReductionLayout{rows, l.n, 1}, eps);
  });
  double loss = 0;
  for (double v : block_loss) loss += v;
  return loss;
}
template <class T>
  requires is_reduced_float_v<T>
void cross_entropy_backward(const T* x, const std::int64_t* targets, const float* lse, float scale, T* gx,
                            const ReductionLayout& l, double eps) {
  if (l.inner != 1) {
    Tensor<float> gxf = float_buffer(l.numel());
    cross_entropy_backward(widen(x, l.numel()).data(), targets, lse, scale, gxf.data(), l, eps);
    narrow(gxf, gx);
    return;
  }
  over_row_blocks(l.outer, l.n, [&](std::int64_t first, std::int64_t rows, auto buffer) {
    const std::int64_t at = first * l.n, count = rows * l.n;
    float *xb = buffer(0), *gxb = buffer(1);
    convert_run(x + at, count, xb);
    cross_entropy_backward(static_cast<const float*>(xb), targets + first, lse + first, scale, gxb,
                           ReductionLayout{rows, l.n, 1}, eps);
    convert_run(static_cast<const float*>(gxb), count, gx + at);
  });
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::cross_entropy_forward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::cross_entropy_backward)
