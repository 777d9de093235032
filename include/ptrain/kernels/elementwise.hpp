#pragma once
// The dispatch points of the elementwise kernels (autograd/ops/activation.hpp, arithmetic.hpp,
// dropout.hpp, shape.hpp and Node::accumulate): each takes the executor first. CpuExecutor reaches
// the tuned CPU loops (kernels/cpu/elementwise.hpp and copy.hpp: OpenMP loops over T, Eigen array
// expressions); any other executor runs kernels/indexed/elementwise.hpp.
#include <Eigen/Core>
#include <cstdint>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/cpu/copy.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"

namespace ptrain::kernels {

// out[i] = f(in[i]), f a functor of kernels/functors.hpp.
template <class T, class F>
void map(const CpuExecutor&, const T* in, T* out, std::int64_t n, F f) {
  ProfiledOp profiled("elementwise");
  map(in, out, n, f);
}
template <class Ex, class T, class F>
void map(const Ex& ex, const T* in, T* out, std::int64_t n, F f) {
  indexed::map(ex, in, out, n, f);
}

// out[i] = f(a[i], b[i]).
template <class T, class F>
void map2(const CpuExecutor&, const T* a, const T* b, T* out, std::int64_t n, F f) {
  ProfiledOp profiled("elementwise");
  map2(a, b, out, n, f);
}
template <class Ex, class T, class F>
void map2(const Ex& ex, const T* a, const T* b, T* out, std::int64_t n, F f) {
  indexed::map2(ex, a, b, out, n, f);
}

// dst[i] += src[i]: a gradient accumulated into another.
template <class T>
void add_into(const CpuExecutor&, T* dst, const T* src, std::int64_t n) {
  ProfiledOp profiled("elementwise");
  detail::array_of(dst, n) += detail::array_of(src, n);
}
template <class Ex, class T>
void add_into(const Ex& ex, T* dst, const T* src, std::int64_t n) {
  indexed::map2(ex, dst, src, dst, n, Add{});
}

// out[i] = factor * in[i].
template <class T>
void scale(const CpuExecutor&, const T* in, T* out, std::int64_t n, double factor) {
  ProfiledOp profiled("elementwise");
  detail::array_of(out, n) = detail::array_of(in, n) * static_cast<T>(factor);
}
template <class Ex, class T>
void scale(const Ex& ex, const T* in, T* out, std::int64_t n, double factor) {
  indexed::map(ex, in, out, n, Scale{factor});
}

// out[i] = in[i] * scale where mask keeps element i, else 0: dropout's forward and backward. The
// CPU computes in T with a scale in accumulate_t<T>; the indexed kernels in accumulate_t<T>.
template <class T>
void dropout(const CpuExecutor&, const T* in, T* out, std::int64_t n, DropoutMask mask, double scale) {
  ProfiledOp profiled("elementwise");
  map_indexed(in, out, n, DropoutApply<T, accumulate_t<T>>{mask, static_cast<accumulate_t<T>>(scale)});
}
template <class Ex, class T>
void dropout(const Ex& ex, const T* in, T* out, std::int64_t n, DropoutMask mask, double scale) {
  using A = accumulate_t<T>;
  indexed::map_indexed(ex, in, out, n, DropoutApply<A, A>{mask, static_cast<A>(scale)});
}

// rows x cols between row strides: concat and its backward.
template <class T>
void copy_rows(const CpuExecutor&, const T* src, std::int64_t src_stride, T* dst, std::int64_t dst_stride,
               std::int64_t rows, std::int64_t cols) {
  ProfiledOp profiled("elementwise");
  copy_rows(src, src_stride, dst, dst_stride, rows, cols);
}
template <class Ex, class T>
void copy_rows(const Ex& ex, const T* src, std::int64_t src_stride, T* dst, std::int64_t dst_stride, std::int64_t rows,
               std::int64_t cols) {
  indexed::copy_rows(ex, src, src_stride, dst, dst_stride, rows, cols);
}

// out[i] = f(a[at_a(i)], b[at_b(i)]) for the n elements of a broadcast result (no tuned CPU
// kernel: the indexed one runs on every executor).
using indexed::broadcast_map2;
// out[i] = f(g[i], a[at_a(i)], b[at_b(i)]): the gradients of a broadcast binary op.
using indexed::broadcast_map3;
// y = x.permute(dims) copied (no tuned CPU kernel either).
using indexed::permute;
using indexed::PermuteIndex;

}  // namespace ptrain::kernels
