#pragma once
// Executor-generic softmax and log-softmax along n of a tensor seen as [outer, n, inner]
// (kernels/cpu/softmax.hpp's algorithm for a GPU): one row reduction per position keeps a running
// (max, sum of exp) pair, then an indexed kernel writes each element from its row's log-sum-exp.
// masked_softmax_forward does the same over the last dimension of x + mask (mask broadcast, -inf
// where a position takes no part), a row with no position left giving zeros.
#include <cmath>
#include <cstdint>
#include <limits>

#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"
#include "ptrain/kernels/geometry/layout.hpp"

namespace ptrain::kernels::indexed {

// Row r = o * inner + k of the layout is the n elements (o, j, k); element j of it sits here.
PTRAIN_HOST_DEVICE inline std::int64_t row_element(const ReductionLayout& l, std::int64_t row, std::int64_t j) {
  const std::int64_t o = row / l.inner;
  return (o * l.n + j) * l.inner + (row - o * l.inner);
}
// The row that flat element i belongs to.
PTRAIN_HOST_DEVICE inline std::int64_t row_of(const ReductionLayout& l, std::int64_t i) {
  const std::int64_t o = i / (l.n * l.inner);
  return o * l.inner + i % l.inner;
}
inline bool rows_contiguous(const ReductionLayout& l) { return l.inner == 1; }

// sum exp(x - max) with the max of the terms seen so far: any two partial folds combine, so a
// GPU block reads the row once. sum == 0 marks the empty fold (a real one holds exp(0) = 1).
template <class A>
struct MaxSumExp {
  A max, sum;
  PTRAIN_HOST_DEVICE static MaxSumExp empty() { return {-std::numeric_limits<A>::infinity(), A(0)}; }
  PTRAIN_HOST_DEVICE static MaxSumExp of(A x) { return {x, A(1)}; }
  PTRAIN_HOST_DEVICE static MaxSumExp combine(MaxSumExp a, MaxSumExp b) {
    using std::exp;
    if (a.sum == A(0)) return b;
    if (b.sum == A(0)) return a;
    const A m = a.max > b.max ? a.max : b.max;
    return {m, a.sum * exp(a.max - m) + b.sum * exp(b.max - m)};
  }
  PTRAIN_HOST_DEVICE A log_sum_exp() const {
    using std::log;
    return max + log(sum);
  }
};

// lse[row] = log sum_j exp(x(row, j)).
template <class T>
struct RowLogSumExp {
  using A = accumulate_t<T>;
  using accumulator = MaxSumExp<A>;
  const T* x;
  ReductionLayout l;
  A* lse;
  PTRAIN_HOST_DEVICE accumulator identity() const { return accumulator::empty(); }
  PTRAIN_HOST_DEVICE accumulator term(std::int64_t row, std::int64_t j) const {
    return accumulator::of(to_accumulate(x[row_element(l, row, j)]));
  }
  PTRAIN_HOST_DEVICE accumulator combine(accumulator a, accumulator b) const { return accumulator::combine(a, b); }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, accumulator total) const { lse[row] = total.log_sum_exp(); }
};

// y = exp(x - lse) (softmax) or x - lse (log_softmax).
template <class T>
struct SoftmaxFromLse {
  using A = accumulate_t<T>;
  const T* x;
  const A* lse;
  T* y;
  ReductionLayout l;
  bool take_log;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    using std::exp;
    const A shifted = to_accumulate(x[i]) - lse[row_of(l, i)];
    y[i] = from_accumulate<T>(take_log ? shifted : exp(shifted));
  }
};

// y = softmax(x) or log_softmax(x) along n: kernels::softmax_forward.
template <class T, class Ex>
void softmax_forward(const Ex& ex, const T* x, T* y, const ReductionLayout& l, bool take_log) {
  if (l.numel() == 0) return;
  const std::int64_t rows = l.outer * l.inner;
  auto lse = ex.template buffer<accumulate_t<T>>(rows);
  reduce_rows(ex, rows, l.n, RowLogSumExp<T>{x, l, lse.data()}, rows_contiguous(l));
  ex.indexed(l.numel(), SoftmaxFromLse<T>{x, lse.data(), y, l, take_log});
}

// lse[row] = log sum_j exp(x + mask) over the rows of length n; -inf terms are left out of the
// fold (MaxSumExp's empty fold), so a fully masked row ends at -inf, not at NaN.
template <class T>
struct MaskedRowLogSumExp {
  using A = accumulate_t<T>;
  using accumulator = MaxSumExp<A>;
  const T* x;
  const T* mask;
  BroadcastIndex mask_at;
  std::int64_t n;
  A* lse;
  PTRAIN_HOST_DEVICE accumulator identity() const { return accumulator::empty(); }
  PTRAIN_HOST_DEVICE accumulator term(std::int64_t row, std::int64_t j) const {
    const std::int64_t i = row * n + j;
    const A z = to_accumulate(x[i]) + to_accumulate(mask[mask_at(i)]);
    return z == -std::numeric_limits<A>::infinity() ? accumulator::empty() : accumulator::of(z);
  }
  PTRAIN_HOST_DEVICE accumulator combine(accumulator a, accumulator b) const { return accumulator::combine(a, b); }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, accumulator total) const {
    lse[row] = total.sum == A(0) ? -std::numeric_limits<A>::infinity() : total.log_sum_exp();
  }
};
// y = exp(x + mask - lse), 0 in a row with no unmasked position.
template <class T>
struct MaskedSoftmaxFromLse {
  using A = accumulate_t<T>;
  const T* x;
  const T* mask;
  BroadcastIndex mask_at;
  const A* lse;
  std::int64_t n;
  T* y;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    using std::exp;
    const A row_lse = lse[i / n];
    y[i] = from_accumulate<T>(row_lse == -std::numeric_limits<A>::infinity()
                                  ? A(0)
                                  : exp(to_accumulate(x[i]) + to_accumulate(mask[mask_at(i)]) - row_lse));
  }
};

// y = softmax(x + mask) along the last dimension, x [rows, n], mask broadcast to x's shape by
// mask_at: kernels::masked_softmax_forward. Backward is softmax_backward of y.
template <class T, class Ex>
void masked_softmax_forward(const Ex& ex, const T* x, const T* mask, const BroadcastIndex& mask_at, T* y,
                            std::int64_t rows, std::int64_t n) {
  if (rows * n == 0) return;
  auto lse = ex.template buffer<accumulate_t<T>>(rows);
  reduce_rows(ex, rows, n, MaskedRowLogSumExp<T>{x, mask, mask_at, n, lse.data()}, true);
  ex.indexed(rows * n, MaskedSoftmaxFromLse<T>{x, mask, mask_at, lse.data(), n, y});
}

// sums[row] = sum_j g (log_softmax) or sum_j g * y (softmax).
template <class T>
struct SoftmaxBackwardSums : SumReduction<accumulate_t<T>> {
  using A = accumulate_t<T>;
  const T* y;
  const T* g;
  ReductionLayout l;
  bool take_log;
  A* sums;
  PTRAIN_HOST_DEVICE A term(std::int64_t row, std::int64_t j) const {
    const std::int64_t at = row_element(l, row, j);
    const A gj = to_accumulate(g[at]);
    return take_log ? gj : gj * to_accumulate(y[at]);
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, A total) const { sums[row] = total; }
};
template <class T>
struct SoftmaxBackwardApply {
  using A = accumulate_t<T>;
  const T* y;
  const T* g;
  const A* sums;
  T* gx;
  ReductionLayout l;
  bool take_log;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    using std::exp;
    const A yi = to_accumulate(y[i]), gi = to_accumulate(g[i]), s = sums[row_of(l, i)];
    gx[i] = from_accumulate<T>(take_log ? gi - exp(yi) * s : yi * (gi - s));
  }
};

// gx from the forward output y and the incoming gradient g: kernels::softmax_backward.
template <class T, class Ex>
void softmax_backward(const Ex& ex, const T* y, const T* g, T* gx, const ReductionLayout& l, bool take_log) {
  if (l.numel() == 0) return;
  const std::int64_t rows = l.outer * l.inner;
  auto sums = ex.template buffer<accumulate_t<T>>(rows);
  reduce_rows(ex, rows, l.n, SoftmaxBackwardSums<T>{{}, y, g, l, take_log, sums.data()}, rows_contiguous(l));
  ex.indexed(l.numel(), SoftmaxBackwardApply<T>{y, g, sums.data(), gx, l, take_log});
}

}  // namespace ptrain::kernels::indexed
