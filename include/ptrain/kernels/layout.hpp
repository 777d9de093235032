#pragma once
// A tensor seen as [outer, n, inner] around one dimension: the shape every reduction along a
// dimension (softmax, the class dimension of the losses) works on, on the CPU or a GPU.
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

}  // namespace ptrain::kernels
