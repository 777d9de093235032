#pragma once
// How the CPU kernels compute half and bfloat16: the float kernel runs on float copies of the
// operands and its results are rounded once (the arithmetic of tensor cores and of Apex O2's fp32
// batch norm). Copies go through the vectorised bulk convert: Eigen's own 16-bit casts are
// scalar emulation for half under GCC (its F16C test is broken in 3.4.0).
#include <algorithm>
#include <cstdint>
#include <span>

#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/scratch.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::kernels {

namespace detail {
inline constexpr std::int64_t widen_chunk = 1 << 16;

// dst[i] = To(src[i]), chunks spread over the threads when there are many.
template <class From, class To>
void convert_parallel(const From* src, To* dst, std::int64_t n) {
  const std::int64_t chunks = (n + widen_chunk - 1) / widen_chunk;
#pragma omp parallel for if (chunks >= 4) schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * widen_chunk, count = std::min(widen_chunk, n - begin);
    convert(std::span<const From>(src + begin, static_cast<std::size_t>(count)),
            std::span<To>(dst + begin, static_cast<std::size_t>(count)));
  }
}
}  // namespace detail

// n floats, uninitialised (each kernel writes its whole output).
inline Tensor<float> float_buffer(std::int64_t n) { return Tensor<float>(Shape{n}); }

// A float copy of the n elements at p (null p: an undefined tensor, for an absent operand).
template <class T>
Tensor<float> widen(const T* p, std::int64_t n) {
  if (!p) return {};
  Tensor<float> out = float_buffer(n);
  detail::convert_parallel(p, out.data(), n);
  return out;
}
// rows x cols of p with rows ld apart, packed.
template <class T>
Tensor<float> widen(const T* p, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  if (ld == cols) return widen(p, rows * cols);
  Tensor<float> out = float_buffer(rows * cols);
  for (std::int64_t r = 0; r < rows; ++r)
    convert(std::span<const T>(p + r * ld, static_cast<std::size_t>(cols)),
            std::span<float>(out.data() + r * cols, static_cast<std::size_t>(cols)));
  return out;
}

// p[i] = T(v[i]), rounded once (nothing when p is null).
template <class T>
void narrow(const Tensor<float>& v, T* p) {
  if (p) detail::convert_parallel(v.data(), p, v.numel());
}

// For the 16-bit kernels over rows of n (a [rows, n] view, n the reduced extent): body(first,
// count, buffer) for blocks of whole rows of about 2^15 elements in all, spread over the threads,
// buffer(i) a float buffer of the thread's for block-sized operand i (i < scratch_slots). A kernel
// widens its block's operands there, runs the float kernel on them and rounds its outputs back
// while they are in cache, where whole copies would go to memory and back. The blocks depend on
// rows and n alone, not on the thread count.
template <class Body>
void over_row_blocks(std::int64_t rows, std::int64_t n, Body&& body) {
  constexpr std::int64_t block_elements = std::int64_t{1} << 15;
  const std::int64_t per_block = std::max<std::int64_t>(1, block_elements / std::max<std::int64_t>(1, n));
  const std::int64_t blocks = (rows + per_block - 1) / per_block;
#pragma omp parallel for if (blocks > 1 && rows * n >= detail::widen_chunk) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t first = b * per_block, count = std::min(per_block, rows - first);
    const auto buffer = [&](int i) { return scratch<float>(i, static_cast<std::size_t>(count * n)); };
    body(first, count, buffer);
  }
}
// to[0, n) = from[0, n) widened (or rounded, float to a 16-bit type), on this thread.
template <class From, class To>
void convert_run(const From* from, std::int64_t n, To* to) {
  convert(std::span<const From>(from, static_cast<std::size_t>(n)), std::span<To>(to, static_cast<std::size_t>(n)));
}

// The data of a copy or buffer, or null for an absent one.
inline float* data_or_null(Tensor<float>& t) { return t.defined() ? t.data() : nullptr; }
inline const float* data_or_null(const Tensor<float>& t) { return t.defined() ? t.data() : nullptr; }

}  // namespace ptrain::kernels
