#pragma once
// Copies of row blocks between strided layouts: the body of concat (rows of each input into
// a column range of the output) and of its backward (the reverse).
#include <cstdint>
#include <cstring>

#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

// dst[r * dst_stride + c] = src[r * src_stride + c] for r < rows, c < cols.
template <class T>
void copy_rows(const T* src, std::int64_t src_stride, T* dst, std::int64_t dst_stride, std::int64_t rows,
               std::int64_t cols) {
  if (rows == 0 || cols == 0) return;
  if (src_stride == cols && dst_stride == cols) {
    std::memcpy(dst, src, static_cast<std::size_t>(rows * cols) * sizeof(T));
    return;
  }
#pragma omp parallel for if (rows * cols >= parallel_threshold && rows > 1) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_stride, src + r * src_stride, static_cast<std::size_t>(cols) * sizeof(T));
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::copy_rows)
