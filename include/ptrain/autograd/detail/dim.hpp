#pragma once
// Dimension arguments as in PyTorch: -1 is the last dimension.
#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"

namespace ptrain::detail {

// dim in [-rank, rank) made non-negative; anything else is an error naming the op and shape.
inline int wrap_dim(int dim, const Shape& shape, const char* op) {
  const int rank = shape.rank();
  check(dim >= -rank && dim < rank, op, ": dimension ", dim, " is out of range for a tensor of shape ", shape,
        " (expected ", -rank, " <= dim < ", rank, ")");
  return dim < 0 ? dim + rank : dim;
}

}  // namespace ptrain::detail
