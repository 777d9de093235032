#pragma once
// PyTorch's broadcasting of a small operand (a per-class weight) against a larger shape: which
// element of the small operand each element of the large one meets.
#include <array>
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"

namespace ptrain::detail {

class BroadcastIndex {
 public:
  // Shapes are aligned at their last dimension; each extent of `from` is 1 or equal to `to`'s.
  BroadcastIndex(const Shape& from, const Shape& to, const char* op) : to_(to) {
    check(from.rank() <= to.rank(), op, ": shape ", from, " does not broadcast to ", to, " (more dimensions)");
    std::int64_t stride = 1;
    for (int k = 1; k <= from.rank(); ++k) {
      const std::int64_t f = from[from.rank() - k], t = to[to.rank() - k];
      check(f == 1 || f == t, op, ": shape ", from, " does not broadcast to ", to, " (extent ", f, " against ", t,
            ")");
      strides_[static_cast<std::size_t>(to.rank() - k)] = f == 1 ? 0 : stride;
      stride *= f;
    }
  }
  // The flat index into `from` of flat element i of `to`.
  std::int64_t operator()(std::int64_t i) const {
    std::int64_t at = 0;
    for (int d = to_.rank() - 1; d >= 0 && i > 0; --d) {
      at += (i % to_[d]) * strides_[static_cast<std::size_t>(d)];
      i /= to_[d];
    }
    return at;
  }

 private:
  Shape to_;
  std::array<std::int64_t, Shape::max_rank> strides_{};
};

}  // namespace ptrain::detail
