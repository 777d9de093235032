#pragma once
// Shape: up to 8 extents held inline, so that making and copying shapes never allocates.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <string>

#include "ptrain/core/error.hpp"

namespace ptrain {

class Shape {
 public:
  static constexpr int max_rank = 8;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> extents) {
    check(extents.size() <= max_rank, "Shape: rank ", extents.size(), " exceeds ", max_rank);
    for (auto e : extents) push_back(e);
  }
  template <class It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return extents_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return extents_[static_cast<std::size_t>(i)]; }
  // Negative indices count from the back, as in PyTorch.
  std::int64_t at(int i) const {
    const int k = i < 0 ? i + rank_ : i;
    check(k >= 0 && k < rank_, "Shape ", *this, ": dimension ", i, " out of range");
    return extents_[static_cast<std::size_t>(k)];
  }
  void push_back(std::int64_t e) {
    check(rank_ < max_rank, "Shape: rank exceeds ", max_rank);
    check(e >= 0, "Shape: negative extent ", e);
    extents_[static_cast<std::size_t>(rank_++)] = e;
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= extents_[static_cast<std::size_t>(i)];
    return n;
  }
  const std::int64_t* begin() const { return extents_.data(); }
  const std::int64_t* end() const { return extents_.data() + rank_; }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  friend std::ostream& operator<<(std::ostream& out, const Shape& s) {
    out << '[';
    for (int i = 0; i < s.rank_; ++i) out << (i ? ", " : "") << s[i];
    return out << ']';
  }
  std::string str() const {
    std::ostringstream out;
    out << *this;
    return out.str();
  }

 private:
  std::array<std::int64_t, max_rank> extents_{};
  int rank_ = 0;
};

}  // namespace ptrain
