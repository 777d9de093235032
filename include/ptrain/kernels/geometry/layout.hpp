#pragma once
// Views of a tensor that the kernels of every device share: [outer, n, inner] around one
// dimension (softmax, the class dimension of the losses) and [outer, channels, inner] per channel
// (batch norm, bias sums).
#include <cstdint>

#include "ptrain/core/shape.hpp"

namespace ptrain::kernels {

// The [outer, n, inner] view of shape around dimension dim (already made non-negative).
struct ReductionLayout {
  std::int64_t outer = 1, n = 1, inner = 1;

  static ReductionLayout around(const Shape& shape, int dim) {
    ReductionLayout l;
    for (int i = 0; i < dim; ++i) l.outer *= shape[i];
    l.n = shape[dim];
    for (int i = dim + 1; i < shape.rank(); ++i) l.inner *= shape[i];
    return l;
  }
  std::int64_t numel() const { return outer * n * inner; }
};

// A tensor as [outer, channels, inner]: [N, C] has inner = 1, [N, C, H, W] has inner = H*W.
struct ChannelLayout {
  std::int64_t outer = 0, channels = 0, inner = 1;
  std::int64_t count() const { return outer * inner; }  // elements per channel
  std::int64_t numel() const { return outer * channels * inner; }
};

}  // namespace ptrain::kernels
