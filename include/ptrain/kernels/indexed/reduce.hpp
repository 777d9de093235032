#pragma once
// Executor-generic reductions (see kernels/executor.hpp): the two-stage sum of a tensor (fixed
// blocks, then their partial sums), column sums (linear's bias gradient), per-channel sums (conv's
// bias gradient), and reduce_rows, which picks how a RowReduction runs for the rows' layout.
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/kernels/indexed.hpp"

namespace ptrain::kernels::indexed {

template <class T>
PTRAIN_HOST_DEVICE double load_double(const T* p, std::int64_t i) {
  return static_cast<double>(to_accumulate(p[i]));
}
// p[i] in double, or `otherwise` for an absent (null) operand.
template <class T>
PTRAIN_HOST_DEVICE double load_or(const T* p, std::int64_t i, double otherwise) {
  return p ? load_double(p, i) : otherwise;
}

// Element j (of outer * inner) of channel c in an [outer, channels, inner] tensor.
PTRAIN_HOST_DEVICE inline std::int64_t channel_element(const ChannelLayout& l, std::int64_t c, std::int64_t j) {
  const std::int64_t n = j / l.inner;
  return (n * l.channels + c) * l.inner + (j - n * l.inner);
}

// Whether a channel's elements lie in runs long enough for a GPU block to read them together.
inline bool channel_runs_contiguous(const ChannelLayout& l) { return l.inner >= 32 || l.channels == 1; }

// A row reduction run as an indexed kernel: each thread folds one whole row, in order.
template <RowReduction F>
struct FoldRowPerThread {
  F f;
  std::int64_t length;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t row) const {
    auto total = f.identity();
    for (std::int64_t j = 0; j < length; ++j) total = f.combine(total, f.term(row, j));
    f.finish(row, total);
  }
};

// Runs f over rows x length. A row whose terms lie far apart in memory (`contiguous` false: a
// class dimension with inner > 1, a column) is folded by one thread, so that neighbouring
// threads read neighbouring addresses; but a few long rows still get a block each, or the GPU
// would sit idle. Either way every row sees the same terms and combine.
inline constexpr std::int64_t rows_to_fill_a_gpu = 4096;
inline constexpr std::int64_t short_row = 256;

template <class Ex, RowReduction F>
void reduce_rows(const Ex& ex, std::int64_t rows, std::int64_t length, const F& f, bool contiguous) {
  if (!contiguous && (rows >= rows_to_fill_a_gpu || length <= short_row))
    ex.indexed(rows, FoldRowPerThread<F>{f, length});
  else
    ex.row_reduction(rows, length, f);
}

// Terms summed per block of sum_block (the CPU's kernels::sum_indexed uses the same blocks, so a
// HostExecutor run adds in the same order), in double.
inline constexpr std::int64_t sum_block = 4096;

template <class Term>
struct BlockSums : SumReduction<double> {
  Term f;
  std::int64_t n;
  double* partial;
  PTRAIN_HOST_DEVICE double term(std::int64_t block, std::int64_t j) const {
    const std::int64_t i = block * sum_block + j;
    return i < n ? static_cast<double>(f(i)) : 0.0;
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t block, double total) const { partial[block] = total; }
};

// out[0] = R(factor * the sum of the partials).
template <class R>
struct StoreScaledSum : SumReduction<double> {
  const double* partial;
  double factor;
  R* out;
  PTRAIN_HOST_DEVICE double term(std::int64_t, std::int64_t j) const { return partial[j]; }
  PTRAIN_HOST_DEVICE void finish(std::int64_t, double total) const {
    out[0] = from_accumulate<R>(static_cast<accumulate_t<R>>(factor * total));
  }
};

// out[0] = R(factor * sum of f(i) over [0, n)), f a host-device functor returning a number. An
// empty range sums to 0. out is a device pointer under a GPU executor: nothing waits for it.
template <class R, class Ex, class Term>
void sum_terms(const Ex& ex, std::int64_t n, const Term& f, double factor, R* out) {
  const std::int64_t blocks = (n + sum_block - 1) / sum_block;
  auto partial = ex.template buffer<double>(blocks > 0 ? blocks : 1);
  ex.row_reduction(blocks, sum_block, BlockSums<Term>{{}, f, n, partial.data()});
  ex.row_reduction(1, blocks, StoreScaledSum<R>{{}, partial.data(), factor, out});
}

template <class T>
struct LoadDouble {
  const T* x;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t i) const { return load_double(x, i); }
};

// 1 for an inf or NaN element, else 0 (inf - inf and NaN - NaN are NaN, a finite v - v is 0).
template <class T>
struct NonFinite {
  const T* x;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t i) const {
    const double v = load_double(x, i);
    return v - v == 0.0 ? 0.0 : 1.0;
  }
};

// out[0] = how many of x[0, n) are inf or NaN, in the executor's memory (train/non_finite.hpp's
// check of the gradients before an optimizer step).
template <class T, class Ex>
void count_non_finite(const Ex& ex, const T* x, std::int64_t n, double* out) {
  sum_terms(ex, n, NonFinite<T>{x}, 1.0, out);
}

template <class T>
struct SquareDouble {
  const T* x;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t i) const {
    const double v = load_double(x, i);
    return v * v;
  }
};

// out[0] = the sum of x[0, n)'s squares in double, in the executor's memory (a gradient norm).
template <class T, class Ex>
void sum_of_squares(const Ex& ex, const T* x, std::int64_t n, double* out) {
  sum_terms(ex, n, SquareDouble<T>{x}, 1.0, out);
}

// out[0] = factor * sum(x[0, n)), summed in double: the forward of autograd/ops/reduce.hpp's sum
// (factor 1) and mean (factor 1 / n).
template <class T, class Ex>
void sum_all(const Ex& ex, const T* x, std::int64_t n, double factor, T* out) {
  sum_terms(ex, n, LoadDouble<T>{x}, factor, out);
}

// out[c] = the sum of x's terms along one column or channel, accumulated in A.
template <class T, class A, class Layout>
struct StridedSums : SumReduction<A> {
  const T* x;
  Layout layout;
  T* out;
  PTRAIN_HOST_DEVICE A term(std::int64_t c, std::int64_t j) const {
    return static_cast<A>(to_accumulate(x[layout(c, j)]));
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t c, A total) const {
    out[c] = from_accumulate<T>(static_cast<accumulate_t<T>>(total));
  }
};
struct ColumnLayout {
  std::int64_t cols;
  PTRAIN_HOST_DEVICE std::int64_t operator()(std::int64_t c, std::int64_t r) const { return r * cols + c; }
};
struct ChannelElements {
  ChannelLayout l;
  PTRAIN_HOST_DEVICE std::int64_t operator()(std::int64_t c, std::int64_t j) const {
    return channel_element(l, c, j);
  }
};

// out[c] = sum over r of x[r, c], x [rows, cols], accumulated in accumulate_t<T>: linear's bias
// gradient (autograd/ops/linear.hpp).
template <class T, class Ex>
void column_sums(const Ex& ex, const T* x, std::int64_t rows, std::int64_t cols, T* out) {
  check(rows >= 0 && cols >= 0, "column_sums: negative extent [", rows, ", ", cols, "]");
  reduce_rows(ex, cols, rows, StridedSums<T, accumulate_t<T>, ColumnLayout>{{}, x, ColumnLayout{cols}, out},
              cols == 1);
}

// out[c] = sum of channel c of x [outer, channels, inner], in double: conv's bias gradient
// (kernels/cpu/conv.hpp's conv2d_grad_bias with {batch, out_channels, out_plane}).
template <class T, class Ex>
void channel_sums(const Ex& ex, const T* x, const ChannelLayout& l, T* out) {
  check(l.outer >= 0 && l.channels >= 0 && l.inner >= 1, "channel_sums: bad layout [", l.outer, ", ", l.channels,
        ", ", l.inner, "]");
  reduce_rows(ex, l.channels, l.count(), StridedSums<T, double, ChannelElements>{{}, x, ChannelElements{l}, out},
              channel_runs_contiguous(l));
}

// out[i] = factor * g[0], g a one-element tensor in the executor's memory (the gradient of a
// scalar): the backward of sum and mean.
template <class T>
struct BroadcastScaledScalar {
  const T* g;
  double factor;
  T* out;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    out[i] = from_accumulate<T>(static_cast<accumulate_t<T>>(factor * static_cast<double>(to_accumulate(g[0]))));
  }
};

// out[j] = the sum, in double, of the elements of g that fold onto element j of the operand.
template <class T>
struct FoldSums : SumReduction<double> {
  const T* g;
  BroadcastFold fold;
  T* out;
  PTRAIN_HOST_DEVICE double term(std::int64_t j, std::int64_t k) const { return load_double(g, fold(j, k)); }
  PTRAIN_HOST_DEVICE void finish(std::int64_t j, double total) const {
    out[j] = from_accumulate<T>(static_cast<accumulate_t<T>>(total));
  }
};

// out (n elements, the operand's shape) = g (the broadcast result's shape) summed over the
// dimensions the operand was broadcast along: the gradient of a broadcast operand.
template <class Ex, class T>
void sum_to(const Ex& ex, const T* g, const BroadcastFold& fold, T* out, std::int64_t n) {
  check(n >= 0, "sum_to: negative element count ", n);
  if (n == 0) return;
  ex.row_reduction(n, fold.count(), FoldSums<T>{{}, g, fold, out});
}

}  // namespace ptrain::kernels::indexed
