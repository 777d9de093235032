#pragma once
// The small convolutional network and the random batches the data-parallel and sharded tests train
// on: 6 parameters of unequal sizes (a conv, two linears), inputs 2 x 8 x 8, 3 classes; and the
// same with batch norm after the convolution.
#include <cstdint>
#include <memory>
#include <vector>

#include <ptrain/core/rng.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>

namespace ptrain::test {

template <class T>
std::shared_ptr<Sequential<T>> make_small_conv_net(std::uint64_t seed) {
  manual_seed(seed);
  Conv2dOptions same;
  same.pad_h = same.pad_w = 1;
  return std::make_shared<Sequential<T>>(std::initializer_list<std::shared_ptr<Module<T>>>{
      make<Conv2d<T>>(2, 4, 3, same), make<ReLU<T>>(), make<MaxPool2d<T>>(2), make<Flatten<T>>(),
      make<Linear<T>>(4 * 4 * 4, 8), make<ReLU<T>>(), make<Linear<T>>(8, 3)});
}

template <class T>
std::shared_ptr<Sequential<T>> make_small_batch_norm_net(std::uint64_t seed) {
  manual_seed(seed);
  Conv2dOptions same;
  same.pad_h = same.pad_w = 1;
  return std::make_shared<Sequential<T>>(std::initializer_list<std::shared_ptr<Module<T>>>{
      make<Conv2d<T>>(2, 4, 3, same), make<BatchNorm2d<T>>(4), make<ReLU<T>>(), make<MaxPool2d<T>>(2),
      make<Flatten<T>>(), make<Linear<T>>(4 * 4 * 4, 3)});
}

template <class T>
struct Batches {
  std::vector<Tensor<T>> inputs;
  std::vector<std::vector<std::int64_t>> targets;
};

// `steps` batches of `batch` normal inputs and uniform targets, from Rng(seed).
template <class T>
Batches<T> make_small_conv_batches(int steps, std::int64_t batch, std::uint64_t seed) {
  Rng rng(seed);
  Batches<T> b;
  for (int s = 0; s < steps; ++s) {
    Tensor<T> x({batch, 2, 8, 8});
    for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<T>(rng.normal());
    std::vector<std::int64_t> y;
    for (std::int64_t i = 0; i < batch; ++i) y.push_back(static_cast<std::int64_t>(rng.below(3)));
    b.inputs.push_back(x);
    b.targets.push_back(y);
  }
  return b;
}

}  // namespace ptrain::test
