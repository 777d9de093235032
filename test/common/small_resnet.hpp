#pragma once
// A small residual network of every layer ResNet uses (conv, batch norm, relu, max pool, a
// BasicBlock with a downsampling shortcut, adaptive average pool, flatten, linear) on device D,
// for inputs [N, 3, H, W]: the Trainer tests run it on HostEmulated against the CPU.
#include <cstdint>
#include <memory>

#include <ptrain/core/rng.hpp>
#include <ptrain/models/resnet.hpp>

namespace ptrain::test {

// Weights drawn from seed (the same on every device).
template <class T, class D>
std::shared_ptr<Sequential<T, D>> small_resnet(std::uint64_t seed, std::int64_t classes) {
  manual_seed(seed);
  auto net = make<Sequential<T, D>>();
  net->push_back("conv1", make<Conv2d<T, D>>(3, 8, 3, Conv2dOptions{.pad_h = 1, .pad_w = 1}));
  net->push_back("bn1", make<BatchNorm2d<T, D>>(8));
  net->push_back("relu", make<ReLU<T, D>>());
  net->push_back("maxpool", make<MaxPool2d<T, D>>(2));
  net->push_back("layer1", make<BasicBlock<T, D>>(8, 16, 2));
  net->push_back("avgpool", make<AdaptiveAvgPool2d<T, D>>(1));
  net->push_back("flatten", make<Flatten<T, D>>(1));
  net->push_back("fc", make<Linear<T, D>>(16, classes));
  return net;
}

}  // namespace ptrain::test
