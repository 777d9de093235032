#pragma once
// What a dataset is: a size and random access to examples. An example is one input tensor (no
// batch dimension, e.g. [C, H, W]) and an integer class target, or for segmentation a target map
// of one class per pixel.
#include <concepts>
#include <cstdint>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

// Which part of a dataset with a fixed train/test split to read.
enum class Split { train, test };

struct Example {
  Example() = default;
  Example(Tensor<float> x, std::int64_t y, Tensor<std::int64_t> map = {})
      : input(std::move(x)), target(y), target_map(std::move(map)) {}

  // May be a view of the dataset's own storage: readers copy it, they never write into it.
  Tensor<float> input;
  std::int64_t target = 0;
  // Segmentation: the class of each pixel, [H, W]; when defined it is the target (and `target` unused).
  Tensor<std::int64_t> target_map;
};

// get(i) must be safe to call from the loader's worker threads while the dataset is not modified.
template <class D>
concept Dataset = requires(const D& d, std::int64_t i) {
  { d.size() } -> std::convertible_to<std::int64_t>;
  { d.get(i) } -> std::same_as<Example>;
};

// The archetype of Dataset: the least a type must provide (see test/data/loader_test.cpp).
struct DatasetArchetype {
  std::int64_t size() const { return 0; }
  Example get(std::int64_t) const { return {}; }
};
static_assert(Dataset<DatasetArchetype>);

// Examples held in memory: inputs [N, ...] and one target per row. get(i) is a view of row i,
// so nothing is copied until the loader assembles a batch. Copies share the storage.
class TensorDataset {
 public:
  TensorDataset() = default;
  TensorDataset(Tensor<float> inputs, std::vector<std::int64_t> targets);

  std::int64_t size() const { return static_cast<std::int64_t>(targets_.size()); }
  Example get(std::int64_t i) const {
    check(i >= 0 && i < size(), "TensorDataset: index ", i, " out of range for ", size(), " examples");
    return {inputs_.slice(i, i + 1).reshape(example_shape_), targets_[static_cast<std::size_t>(i)]};
  }

  const Tensor<float>& inputs() const { return inputs_; }
  const std::vector<std::int64_t>& targets() const { return targets_; }
  // The shape of one example: the inputs' shape without its first dimension.
  const Shape& example_shape() const { return example_shape_; }

 private:
  Tensor<float> inputs_;
  std::vector<std::int64_t> targets_;
  Shape example_shape_;
};

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE TensorDataset::TensorDataset(Tensor<float> inputs, std::vector<std::int64_t> targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  check(inputs_.rank() >= 1, "TensorDataset: expected inputs [N, ...], got shape ", inputs_.shape());
  check(static_cast<std::int64_t>(targets_.size()) == inputs_.size(0), "TensorDataset: ", inputs_.size(0),
        " inputs (shape ", inputs_.shape(), ") but ", targets_.size(), " targets");
  example_shape_ = Shape(inputs_.shape().begin() + 1, inputs_.shape().end());
}
#endif

}  // namespace ptrain
