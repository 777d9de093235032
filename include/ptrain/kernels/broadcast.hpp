#pragma once
// PyTorch's broadcasting of a small operand (a per-class weight) against a larger shape: which
// element of the small operand each element of the large one meets. Plain data, so a GPU kernel
// can hold one and call it.
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/core/shape.hpp"

namespace ptrain::kernels {

class BroadcastIndex {
 public:
  // Shapes are aligned at their last dimension; each extent of `from` is 1 or equal to `to`'s.
  BroadcastIndex(const Shape& from, const Shape& to, const char* op) : rank_(to.rank()) {
    check(from.rank() <= to.rank(), op, ": shape ", from, " does not broadcast to ", to, " (more dimensions)");
    for (int d = 0; d < rank_; ++d) to_[d] = to[d];
    std::int64_t stride = 1;
    for (int k = 1; k <= from.rank(); ++k) {
      const std::int64_t f = from[from.rank() - k], t = to[to.rank() - k];
      check(f == 1 || f == t, op, ": shape ", from, " does not broadcast to ", to, " (extent ", f, " against ", t,
            ")");
      strides_[to.rank() - k] = f == 1 ? 0 : stride;
      stride *= f;
    }
  }
  // The flat index into `from` of flat element i of `to`.
  PTRAIN_HOST_DEVICE std::int64_t operator()(std::int64_t i) const {
    std::int64_t at = 0;
    for (int d = rank_ - 1; d >= 0 && i > 0; --d) {
      at += (i % to_[d]) * strides_[d];
      i /= to_[d];
    }
    return at;
  }

 private:
  int rank_;
  std::int64_t to_[Shape::max_rank] = {};
  std::int64_t strides_[Shape::max_rank] = {};
};

}  // namespace ptrain::kernels
