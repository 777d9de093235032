#pragma once
// Class scores laid out as in PyTorch's losses: [N, C] or [N, C, d1, ..., dk] with the classes
// on dimension 1, and one target per (n, d1, ..., dk) position, row-major.
#include <cstdint>
#include <span>

#include "ptrain/core/error.hpp"
#include "ptrain/kernels/geometry/layout.hpp"

namespace ptrain::detail {

// The [N, C, d1*...*dk] view of scores, after checking that targets fit it: one per position,
// each a class index in [0, C).
inline kernels::ReductionLayout class_layout(const Shape& scores, std::span<const std::int64_t> targets,
                                             const char* op) {
  check(scores.rank() >= 2, op, ": expected scores of shape [N, C] or [N, C, d1, ...], got ", scores);
  const auto layout = kernels::ReductionLayout::around(scores, 1);
  const auto positions = layout.outer * layout.inner;
  check(static_cast<std::int64_t>(targets.size()) == positions, op, ": ", targets.size(),
        " targets for scores of shape ", scores, ", which need ", positions, " (one per position)");
  for (std::size_t i = 0; i < targets.size(); ++i)
    check(targets[i] >= 0 && targets[i] < layout.n, op, ": target ", targets[i], " at index ", i,
          " is out of range for ", layout.n, " classes (expected 0 <= target < ", layout.n, ")");
  return layout;
}

}  // namespace ptrain::detail
