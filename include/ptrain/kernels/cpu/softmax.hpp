#pragma once
// Softmax and log-softmax over one dimension of a row-major tensor seen as [outer, n, inner]
// (n the reduced extent). inner == 1 (the last dimension, as in classification) runs row by
// row on contiguous Eigen maps; otherwise each [n, inner] block is swept row by row with
// per-column running maxima and sums, so every pass reads memory contiguously.
// half and bfloat16 are computed in float (widen.hpp), a block of rows at a time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <Eigen/Core>

#include "ptrain/core/half.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/cpu/widen.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

namespace detail {
template <class T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using RowVec = Eigen::Array<T, 1, Eigen::Dynamic>;
}  // namespace detail

// y = softmax(x) or log_softmax(x) along n.
template <class T>
void softmax_forward(const T* x, T* y, const ReductionLayout& l, bool take_log) {
  if (l.numel() == 0) return;
  const std::int64_t n = l.n, inner = l.inner;
  if (inner == 1) {
#pragma omp parallel for if (l.numel() >= parallel_threshold && l.outer > 1) schedule(static)
    for (std::int64_t r = 0; r < l.outer; ++r) {
      Eigen::Map<const detail::Vec<T>> xr(x + r * n, n);
      Eigen::Map<detail::Vec<T>> yr(y + r * n, n);
      const T max = xr.maxCoeff();
      yr = xr - max;
      if (take_log) {
        yr -= std::log(yr.exp().sum());
      } else {
        yr = yr.exp();
        yr *= T(1) / yr.sum();
      }
    }
    return;
  }
#pragma omp parallel if (l.numel() >= parallel_threshold && l.outer > 1)
  {
    detail::RowVec<T> max(inner), sum(inner);
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < l.outer; ++o) {
      const T* xb = x + o * n * inner;
      T* yb = y + o * n * inner;
      auto xrow = [&](std::int64_t j) { return Eigen::Map<const detail::RowVec<T>>(xb + j * inner, inner); };
      auto yrow = [&](std::int64_t j) { return Eigen::Map<detail::RowVec<T>>(yb + j * inner, inner); };
      max = xrow(0);
      for (std::int64_t j = 1; j < n; ++j) max = max.max(xrow(j));
      sum.setZero();
      for (std::int64_t j = 0; j < n; ++j) {
        auto yj = yrow(j);
        yj = xrow(j) - max;
        if (take_log) {
          sum += yj.exp();
        } else {
          yj = yj.exp();
          sum += yj;
        }
      }
      if (take_log) {
        sum = sum.log();
        for (std::int64_t j = 0; j < n; ++j) yrow(j) -= sum;
      } else {
        sum = sum.inverse();
        for (std::int64_t j = 0; j < n; ++j) yrow(j) *= sum;
      }
    }
  }
}

// gx from the forward output y and the incoming gradient g:
//   softmax:     gx = y * (g - sum_n(g * y))
//   log_softmax: gx = g - exp(y) * sum_n(g)
template <class T>
void softmax_backward(const T* y, const T* g, T* gx, const ReductionLayout& l, bool take_log) {
  if (l.numel() == 0) return;
  const std::int64_t n = l.n, inner = l.inner;
  if (inner == 1) {
#pragma omp parallel for if (l.numel() >= parallel_threshold && l.outer > 1) schedule(static)
    for (std::int64_t r = 0; r < l.outer; ++r) {
      Eigen::Map<const detail::Vec<T>> yr(y + r * n, n), gr(g + r * n, n);
      Eigen::Map<detail::Vec<T>> gxr(gx + r * n, n);
      if (take_log) {
        gxr = gr - yr.exp() * gr.sum();
      } else {
        gxr = yr * (gr - (gr * yr).sum());
      }
    }
    return;
  }
#pragma omp parallel if (l.numel() >= parallel_threshold && l.outer > 1)
  {
    detail::RowVec<T> sum(inner);
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < l.outer; ++o) {
      const std::int64_t base = o * n * inner;
      auto row = [&](const T* p, std::int64_t j) {
        return Eigen::Map<const detail::RowVec<T>>(p + base + j * inner, inner);
      };
      sum.setZero();
      for (std::int64_t j = 0; j < n; ++j) {
        if (take_log)
          sum += row(g, j);
        else
          sum += row(g, j) * row(y, j);
      }
      for (std::int64_t j = 0; j < n; ++j) {
        Eigen::Map<detail::RowVec<T>> out(gx + base + j * inner, inner);
        if (take_log)
          out = row(g, j) - row(y, j).exp() * sum;
        else
          out = row(y, j) * (row(g, j) - sum);
      }
    }
  }
}

// y = softmax(x + mask) over rows of length n, mask broadcast to x [rows, n] by mask_at; a row
// masked everywhere gives zeros (attention's masked softmax). A row's terms are gathered once into
// a buffer in accumulate_t<T>, then exponentiated and scaled as Eigen arrays (vectorised); masked
// terms are set to exactly 0, not to the vectorised exp's tiny value of -inf.
template <class T>
void masked_softmax_forward(const T* x, const T* mask, const BroadcastIndex& mask_at, T* y, std::int64_t rows,
                            std::int64_t n) {
  using A = accumulate_t<T>;
  constexpr A minus_inf = -std::numeric_limits<A>::infinity();
  detail::parallel_ranges(
      rows,
      [=, &mask_at](std::int64_t begin, std::int64_t end) {
        detail::Vec<A> z(n);
        for (std::int64_t r = begin; r < end; ++r) {
          const std::int64_t base = r * n;
          for (std::int64_t j = 0; j < n; ++j)
            z[j] = static_cast<A>(x[base + j]) + static_cast<A>(mask[mask_at(base + j)]);
          const A max = z.maxCoeff();
          if (max == minus_inf) {
            std::fill(y + base, y + base + n, T(0));
            continue;
          }
          z = (z == minus_inf).select(A(0), (z - max).exp());
          const A inverse = A(1) / z.sum();
          for (std::int64_t j = 0; j < n; ++j) y[base + j] = static_cast<T>(z[j] * inverse);
        }
      },
      n);
}

// The 16-bit types: the float kernels, each result rounded once. Over the last dimension, on
// blocks of rows widened into a thread's buffers (over_row_blocks); over inner ones, on whole
// widened copies.
template <class T>
  requires is_reduced_float_v<T>
void softmax_forward(const T* x, T* y, const ReductionLayout& l, bool take_log) {
  if (l.inner == 1) {
    over_row_blocks(l.outer, l.n, [&](std::int64_t first, std::int64_t rows, auto buffer) {
      const std::int64_t at = first * l.n, count = rows * l.n;
      float* block = buffer(0);
      convert_run(x + at, count, block);
      softmax_forward(static_cast<const float*>(block), block, ReductionLayout{rows, l.n, 1}, take_log);
      convert_run(static_cast<const float*>(block), count, y + at);
    });
    return;
  }
  Tensor<float> yf = float_buffer(l.numel());
  softmax_forward(widen(x, l.numel()).data(), yf.data(), l, take_log);
  narrow(yf, y);
}
template <class T>
  requires is_reduced_float_v<T>
void softmax_backward(const T* y, const T* g, T* gx, const ReductionLayout& l, bool take_log) {
  if (l.inner == 1) {
    over_row_blocks(l.outer, l.n, [&](std::int64_t first, std::int64_t rows, auto buffer) {
      const std::int64_t at = first * l.n, count = rows * l.n;
      float *yb = buffer(0), *gb = buffer(1), *gxb = buffer(2);
      convert_run(y + at, count, yb);
      convert_run(g + at, count, gb);
      softmax_backward(static_cast<const float*>(yb), static_cast<const float*>(gb), gxb,
                       ReductionLayout{rows, l.n, 1}, take_log);
      convert_run(static_cast<const float*>(gxb), count, gx + at);
    });
    return;
  }
  Tensor<float> gxf = float_buffer(l.numel());
  softmax_backward(widen(y, l.numel()).data(), widen(g, l.numel()).data(), gxf.data(), l, take_log);
  narrow(gxf, gx);
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::softmax_forward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::softmax_backward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::masked_softmax_forward)
