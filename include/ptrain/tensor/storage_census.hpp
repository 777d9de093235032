#pragma once
// StorageCensus: the live bytes a set of tensors holds, as asked of their device, each
// allocation counted once (copies and views share one; a bucket's gradients are views of it).
// Counting several sets in turn with one census gives each only the allocations no earlier set
// held, so the sets' bytes add up to the bytes of all their allocations together.
//
//   StorageCensus census;
//   const std::int64_t params = census.count(parameter_values);
//   const std::int64_t grads = census.count(gradients);  // none counted twice
#include <cstdint>
#include <unordered_set>

#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

class StorageCensus {
 public:
  // The bytes of t's allocation if no tensor counted before shares it, else 0.
  template <class T, class D>
  std::int64_t count(const Tensor<T, D>& t) {
    const std::size_t bytes = t.storage_bytes();
    if (bytes == 0 || !seen_.insert(t.storage_address()).second) return 0;
    total_ += static_cast<std::int64_t>(bytes);
    return static_cast<std::int64_t>(bytes);
  }
  // The bytes of the allocations of a range of tensors not counted before.
  template <class Range>
    requires requires(const Range& r) { r.begin(); r.end(); }
  std::int64_t count(const Range& tensors) {
    std::int64_t bytes = 0;
    for (const auto& t : tensors) bytes += count(t);
    return bytes;
  }
  // Every allocation counted so far.
  std::int64_t total() const { return total_; }

 private:
  std::unordered_set<const void*> seen_;
  std::int64_t total_ = 0;
};

}  // namespace ptrain
