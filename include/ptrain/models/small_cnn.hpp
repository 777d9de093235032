#pragma once
// The Fashion-MNIST demo network: two 3x3 conv + max-pool stages and two linear layers.
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/conv.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

template <class T = float, class D = Cpu>
class SmallCnn : public Sequential<T, D> {
 public:
  // Input [N, channels, 28, 28].
  explicit SmallCnn(std::int64_t channels = 1, std::int64_t num_classes = 10, double dropout = 0.25) {
    Conv2dOptions same;
    same.pad_h = same.pad_w = 1;
    this->push_back("conv1", make<Conv2d<T, D>>(channels, 32, 3, same));
    this->push_back("relu1", make<ReLU<T, D>>());
    this->push_back("pool1", make<MaxPool2d<T, D>>(2));
    this->push_back("conv2", make<Conv2d<T, D>>(32, 64, 3, same));
    this->push_back("relu2", make<ReLU<T, D>>());
    this->push_back("pool2", make<MaxPool2d<T, D>>(2));
    this->push_back("flatten", make<Flatten<T, D>>(1));
    this->push_back("fc1", make<Linear<T, D>>(64 * 7 * 7, 128));
    this->push_back("relu3", make<ReLU<T, D>>());
    this->push_back("dropout", make<Dropout<T, D>>(dropout));
    this->push_back("fc2", make<Linear<T, D>>(128, num_classes));
  }
};

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::SmallCnn)
