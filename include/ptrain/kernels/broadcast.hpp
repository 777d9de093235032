#pragma once
// PyTorch's broadcasting: the shape two operands broadcast to, which element of an operand each
// element of the result meets (BroadcastIndex), and, for the gradient, which elements of the result
// meet each element of the operand (BroadcastFold). Plain data, so a GPU kernel can hold one.
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/core/shape.hpp"

namespace ptrain::kernels {

// The shape a and b broadcast to (aligned at their last dimension; each pair of extents equal or
// one of them 1), or an error naming op and both shapes.
inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int rank = a.rank() > b.rank() ? a.rank() : b.rank();
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const int da = d - (rank - a.rank()), db = d - (rank - b.rank());
    const std::int64_t ea = da >= 0 ? a[da] : 1, eb = db >= 0 ? b[db] : 1;
    check(ea == eb || ea == 1 || eb == 1, op, ": shapes ", a, " and ", b, " do not broadcast (extent ", ea, " against ",
          eb, " at dimension ", d, " of the result)");
    out.push_back(ea == 1 ? eb : ea);
  }
  return out;
}

// Flat element i of a tensor of extents to_ read at sum_d coordinate_d * strides_[d] of another:
// the index arithmetic of broadcasting (a stride 0 where an extent is 1) and of permuted copies
// (indexed/elementwise.hpp PermuteIndex).
class StridedIndex {
 public:
  PTRAIN_HOST_DEVICE std::int64_t operator()(std::int64_t i) const {
    std::int64_t at = 0;
    for (int d = rank_ - 1; d >= 0 && i > 0; --d) {
      at += (i % to_[d]) * strides_[d];
      i /= to_[d];
    }
    return at;
  }

 protected:
  explicit StridedIndex(int rank) : rank_(rank) {}
  int rank_;
  std::int64_t to_[Shape::max_rank] = {};
  std::int64_t strides_[Shape::max_rank] = {};
};

// The flat index into `from` of flat element i of `to`.
class BroadcastIndex : public StridedIndex {
 public:
  // Shapes are aligned at their last dimension; each extent of `from` is 1 or equal to `to`'s.
  BroadcastIndex(const Shape& from, const Shape& to, const char* op) : StridedIndex(to.rank()) {
    check(from.rank() <= to.rank(), op, ": shape ", from, " does not broadcast to ", to, " (more dimensions)");
    for (int d = 0; d < rank_; ++d) to_[d] = to[d];
    std::int64_t stride = 1;
    for (int k = 1; k <= from.rank(); ++k) {
      const std::int64_t f = from[from.rank() - k], t = to[to.rank() - k];
      check(f == 1 || f == t, op, ": shape ", from, " does not broadcast to ", to, " (extent ", f, " against ", t, ")");
      strides_[to.rank() - k] = f == 1 ? 0 : stride;
      stride *= f;
    }
  }
};

// The other direction: element j of `from` meets `count()` elements of `to`; the k-th of them is
// at (*this)(j, k). A reduction over k sums a gradient of `to`'s shape back to `from`'s.
class BroadcastFold {
 public:
  BroadcastFold(const Shape& from, const Shape& to, const char* op) : rank_(to.rank()) {
    const BroadcastIndex checked(from, to, op);  // the same rules, the same errors
    (void)checked;
    std::int64_t stride = 1;
    for (int d = rank_ - 1; d >= 0; --d) {
      const int f = d - (to.rank() - from.rank());
      to_[d] = to[d];
      kept_[d] = f >= 0 && from[f] == to[d];
      strides_[d] = stride;
      stride *= to[d];
      if (!kept_[d]) count_ *= to[d];
    }
  }
  PTRAIN_HOST_DEVICE std::int64_t count() const { return count_; }
  // The flat index into `to` of the k-th element that meets flat element j of `from`.
  PTRAIN_HOST_DEVICE std::int64_t operator()(std::int64_t j, std::int64_t k) const {
    std::int64_t at = 0;
    for (int d = rank_ - 1; d >= 0; --d) {
      std::int64_t& i = kept_[d] ? j : k;
      at += (i % to_[d]) * strides_[d];
      i /= to_[d];
    }
    return at;
  }

 private:
  int rank_;
  std::int64_t count_ = 1;
  std::int64_t to_[Shape::max_rank] = {};
  std::int64_t strides_[Shape::max_rank] = {};
  bool kept_[Shape::max_rank] = {};
};

}  // namespace ptrain::kernels
