#pragma once
// Executor-generic elementwise work (see kernels/executor.hpp): map / map2 / map_indexed over the
// functors of kernels/functors.hpp, broadcast bias adds, concat's row copies, permuted copies, fill
// and scalar casts.
// The functors see accumulate_t<T> values: half and bfloat16 are widened on load, rounded on store.
#include <cstdint>
#include <span>
#include <type_traits>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/indexed.hpp"

namespace ptrain::kernels::indexed {

// x as To, rounded as static_cast / convert round it (16-bit types: through float, once).
template <class To, class From>
PTRAIN_HOST_DEVICE To cast_scalar(From x) {
  const auto a = to_accumulate(x);
  if constexpr (is_reduced_float_v<To>) return from_accumulate<To>(static_cast<float>(a));
  else return static_cast<To>(a);
}

template <class T, class F>
struct MapKernel {
  const T* in;
  T* out;
  F f;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const { out[i] = from_accumulate<T>(f(to_accumulate(in[i]))); }
};
template <class T, class F>
struct Map2Kernel {
  const T* a;
  const T* b;
  T* out;
  F f;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    out[i] = from_accumulate<T>(f(to_accumulate(a[i]), to_accumulate(b[i])));
  }
};
template <class T, class F>
struct MapIndexedKernel {
  const T* in;
  T* out;
  F f;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    out[i] = from_accumulate<T>(f(static_cast<std::uint64_t>(i), to_accumulate(in[i])));
  }
};

// out[i] = f(a[at_a(i)], b[at_b(i)]): a binary op of two broadcast operands.
template <class T, class F>
struct BroadcastMap2Kernel {
  const T* a;
  BroadcastIndex at_a;
  const T* b;
  BroadcastIndex at_b;
  T* out;
  F f;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    out[i] = from_accumulate<T>(f(to_accumulate(a[at_a(i)]), to_accumulate(b[at_b(i)])));
  }
};
// out[i] = f(g[i], a[at_a(i)], b[at_b(i)]): the gradient of such an op for one operand.
template <class T, class F>
struct BroadcastMap3Kernel {
  const T* g;
  const T* a;
  BroadcastIndex at_a;
  const T* b;
  BroadcastIndex at_b;
  T* out;
  F f;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    out[i] = from_accumulate<T>(f(to_accumulate(g[i]), to_accumulate(a[at_a(i)]), to_accumulate(b[at_b(i)])));
  }
};

// y[o, c, i] += b[c] over y seen as [outer, channels, inner].
template <class T>
struct AddBias {
  T* y;
  const T* b;
  std::int64_t channels, inner;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    y[i] = from_accumulate<T>(to_accumulate(y[i]) + to_accumulate(b[(i / inner) % channels]));
  }
};

// dst[r * dst_stride + c] = src[r * src_stride + c], one thread per copied element.
template <class T>
struct CopyRows {
  const T* src;
  std::int64_t src_stride;
  T* dst;
  std::int64_t dst_stride, cols;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t r = i / cols, c = i - r * cols;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
};

// Where flat element i of a permuted tensor (y = x.permute(dims)) sits in x: y's extents and, for
// each of y's dimensions, the stride of the x dimension it came from.
class PermuteIndex : public StridedIndex {
 public:
  PermuteIndex(const Shape& x, std::span<const int> dims) : StridedIndex(x.rank()) {
    std::int64_t strides[Shape::max_rank] = {};
    std::int64_t stride = 1;
    for (int d = rank_ - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= x[d];
    }
    for (int d = 0; d < rank_; ++d) {
      to_[d] = x[dims[static_cast<std::size_t>(d)]];
      strides_[d] = strides[dims[static_cast<std::size_t>(d)]];
    }
  }
};
template <class T>
struct PermutedCopy {
  const T* x;
  PermuteIndex at;
  T* y;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const { y[i] = x[at(i)]; }
};

template <class T>
struct Fill {
  T* p;
  accumulate_t<T> value;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const { p[i] = from_accumulate<T>(value); }
};

template <class From, class To>
struct Cast {
  const From* src;
  To* dst;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const { dst[i] = cast_scalar<To>(src[i]); }
};
// dst[i] = To(src[i]) * scale, the product in To's accumulate type: the cast and the scaling of
// a data-parallel gradient (parallel/detail/gradient_buckets.hpp) in one pass.
template <class From, class To>
struct CastScaled {
  const From* src;
  To* dst;
  accumulate_t<To> scale;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    dst[i] = from_accumulate<To>(to_accumulate(cast_scalar<To>(src[i])) * scale);
  }
};

// out[i] = f(in[i]) (kernels/cpu/elementwise.hpp map); in may equal out.
template <class Ex, class T, class F>
void map(const Ex& ex, const T* in, T* out, std::int64_t n, F f) {
  check(n >= 0, "map: negative element count ", n);
  ex.indexed(n, MapKernel<T, F>{in, out, f});
}
// out[i] = f(a[i], b[i]) (map2).
template <class Ex, class T, class F>
void map2(const Ex& ex, const T* a, const T* b, T* out, std::int64_t n, F f) {
  check(n >= 0, "map2: negative element count ", n);
  ex.indexed(n, Map2Kernel<T, F>{a, b, out, f});
}
// out[i] = f(i, in[i]) (map_indexed: dropout's mask).
template <class Ex, class T, class F>
void map_indexed(const Ex& ex, const T* in, T* out, std::int64_t n, F f) {
  check(n >= 0, "map_indexed: negative element count ", n);
  ex.indexed(n, MapIndexedKernel<T, F>{in, out, f});
}

// out[i] = f(a[at_a(i)], b[at_b(i)]) for the n elements of the broadcast result.
template <class Ex, class T, class F>
void broadcast_map2(const Ex& ex, const T* a, const BroadcastIndex& at_a, const T* b, const BroadcastIndex& at_b,
                    T* out, std::int64_t n, F f) {
  check(n >= 0, "broadcast_map2: negative element count ", n);
  ex.indexed(n, BroadcastMap2Kernel<T, F>{a, at_a, b, at_b, out, f});
}
// out[i] = f(g[i], a[at_a(i)], b[at_b(i)]), g of the result's shape.
template <class Ex, class T, class F>
void broadcast_map3(const Ex& ex, const T* g, const T* a, const BroadcastIndex& at_a, const T* b,
                    const BroadcastIndex& at_b, T* out, std::int64_t n, F f) {
  check(n >= 0, "broadcast_map3: negative element count ", n);
  ex.indexed(n, BroadcastMap3Kernel<T, F>{g, a, at_a, b, at_b, out, f});
}

// y[outer, channels, inner] += b[channels]. linear: (rows, cols, 1); conv2d: (N, C, H * W).
template <class Ex, class T>
void add_bias(const Ex& ex, T* y, const T* b, std::int64_t outer, std::int64_t channels, std::int64_t inner) {
  check(outer >= 0 && channels >= 0 && inner >= 0, "add_bias: negative extent in [", outer, ", ", channels, ", ",
        inner, "]");
  if (outer * channels * inner == 0) return;
  ex.indexed(outer * channels * inner, AddBias<T>{y, b, channels, inner});
}

// kernels/cpu/copy.hpp copy_rows: rows x cols between row strides.
template <class Ex, class T>
void copy_rows(const Ex& ex, const T* src, std::int64_t src_stride, T* dst, std::int64_t dst_stride,
               std::int64_t rows, std::int64_t cols) {
  check(rows >= 0 && cols >= 0 && src_stride >= cols && dst_stride >= cols, "copy_rows: ", rows, " rows of ", cols,
        " between strides ", src_stride, " and ", dst_stride);
  if (rows == 0 || cols == 0) return;
  ex.indexed(rows * cols, CopyRows<T>{src, src_stride, dst, dst_stride, cols});
}

namespace detail {
inline std::int64_t total_length(std::span<const std::int64_t> blocks) {
  std::int64_t sum = 0;
  for (auto b : blocks) sum += b;
  return sum;
}
}  // namespace detail

// concat's forward (autograd/ops/shape.hpp): input i, `outer` runs of blocks[i] elements each,
// goes to a column range of y's rows, which hold the sum of the blocks.
template <class Ex, class T>
void concat(const Ex& ex, std::type_identity_t<std::span<const T* const>> xs, std::span<const std::int64_t> blocks,
            T* y, std::int64_t outer) {
  check(xs.size() == blocks.size(), "concat: ", xs.size(), " inputs but ", blocks.size(), " block lengths");
  const std::int64_t row = detail::total_length(blocks);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    indexed::copy_rows(ex, xs[i], blocks[i], y + offset, row, outer, blocks[i]);
    offset += blocks[i];
  }
}
// concat's backward: each input's gradient gxs[i] (null: not needed) from its column range of gy.
template <class Ex, class T>
void concat_backward(const Ex& ex, const T* gy, std::span<const std::int64_t> blocks,
                     std::type_identity_t<std::span<T* const>> gxs, std::int64_t outer) {
  check(gxs.size() == blocks.size(), "concat_backward: ", gxs.size(), " gradients but ", blocks.size(),
        " block lengths");
  const std::int64_t row = detail::total_length(blocks);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < gxs.size(); ++i) {
    if (gxs[i]) indexed::copy_rows(ex, gy + offset, row, gxs[i], blocks[i], outer, blocks[i]);
    offset += blocks[i];
  }
}

// y = x.permute(dims) as a contiguous copy, n elements (autograd/ops/shape.hpp permute).
template <class Ex, class T>
void permute(const Ex& ex, const T* x, const PermuteIndex& at, T* y, std::int64_t n) {
  check(n >= 0, "permute: negative element count ", n);
  ex.indexed(n, PermutedCopy<T>{x, at, y});
}

// p[i] = value for i < n.
template <class Ex, class T>
void fill(const Ex& ex, T* p, std::int64_t n, accumulate_t<T> value) {
  check(n >= 0, "fill: negative element count ", n);
  ex.indexed(n, Fill<T>{p, value});
}

// dst[i] = To(src[i]) between float, double, half and bfloat16 (tensor_cast, core/half.hpp convert).
template <class Ex, class From, class To>
void cast(const Ex& ex, const From* src, To* dst, std::int64_t n) {
  check(n >= 0, "cast: negative element count ", n);
  ex.indexed(n, Cast<From, To>{src, dst});
}
// dst[i] = To(src[i]) * scale; From may equal To and src may equal dst.
template <class Ex, class From, class To>
void cast_scaled(const Ex& ex, const From* src, To* dst, std::int64_t n, accumulate_t<To> scale) {
  check(n >= 0, "cast_scaled: negative element count ", n);
  ex.indexed(n, CastScaled<From, To>{src, dst, scale});
}

}  // namespace ptrain::kernels::indexed
