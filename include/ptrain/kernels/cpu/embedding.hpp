#pragma once
// Embedding's backward on the CPU: a row of the weight's gradient at a time, the rows split over
// the threads. A row no position looked up is zeroed in one pass; a looked-up row adds the
// gradient rows of its positions in position order, as kernels/indexed/embedding.hpp does per
// element (so the sums are the same), but a whole row per step, so the loops vectorise.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

// gw [rows, dim] from g [positions, dim] and the positions of each row (first has rows + 1 entries).
template <class T>
void embedding_backward(const T* g, const std::int64_t* first, const std::int64_t* positions, std::int64_t rows,
                        std::int64_t dim, T* gw) {
  detail::parallel_ranges(
      rows,
      [=](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          T* out = gw + r * dim;
          if constexpr (std::is_same_v<accumulate_t<T>, T>) {
            std::fill(out, out + dim, T(0));
            for (std::int64_t k = first[r]; k < first[r + 1]; ++k) {
              const T* in = g + positions[k] * dim;
              for (std::int64_t c = 0; c < dim; ++c) out[c] += in[c];
            }
          } else {  // 16-bit: each column summed in float, rounded once
            for (std::int64_t c = 0; c < dim; ++c) {
              accumulate_t<T> total(0);
              for (std::int64_t k = first[r]; k < first[r + 1]; ++k) total += static_cast<accumulate_t<T>>(g[positions[k] * dim + c]);
              out[c] = static_cast<T>(total);
            }
          }
        }
      },
      dim);
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::embedding_backward)
