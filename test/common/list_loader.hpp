#pragma once
// The smallest loader Trainer::fit accepts: set_epoch, size, and iteration over a list of batches.
#include <cstdint>
#include <vector>

#include <ptrain/tensor/tensor.hpp>

namespace ptrain::test {

template <class T>
struct ListBatch {
  Tensor<T> inputs;
  std::vector<std::int64_t> targets;
};

template <class T>
struct ListLoader {
  std::vector<ListBatch<T>> batches;
  std::int64_t size() const { return static_cast<std::int64_t>(batches.size()); }
  void set_epoch(int) {}
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};

}  // namespace ptrain::test
