#pragma once
// SqueezeNet 1.0 and 1.1 as torchvision builds them (same parameter names, shapes and order): a
// Sequential of features, classifier and a parameter-free flatten, so a pipeline can cut it.
#include <memory>
#include <vector>

#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/conv.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

namespace detail {
// torchvision's SqueezeNet init: kaiming_uniform_ (a = 0) weights, zero biases.
template <class T, class D>
std::shared_ptr<Conv2d<T, D>> squeezenet_conv(std::int64_t in, std::int64_t out, std::int64_t kernel,
                                              const Conv2dOptions& options = {}) {
  auto conv = make<Conv2d<T, D>>(in, out, kernel, options);
  init::on_host(conv->weight.value(), [](Tensor<T>& w) { init::kaiming_uniform(w, 0.0); });
  conv->bias.value().fill(T(0));
  return conv;
}
}  // namespace detail

// Fire module: a 1x1 squeeze, then 1x1 and 3x3 expands whose outputs are concatenated on channels.
template <class T = float, class D = Cpu>
class Fire : public Module<T, D> {
 public:
  Fire(std::int64_t in, std::int64_t squeeze, std::int64_t expand1x1, std::int64_t expand3x3) {
    squeeze_ = this->register_module("squeeze", detail::squeezenet_conv<T, D>(in, squeeze, 1));
    expand1x1_ = this->register_module("expand1x1", detail::squeezenet_conv<T, D>(squeeze, expand1x1, 1));
    expand3x3_ = this->register_module("expand3x3",
                                       detail::squeezenet_conv<T, D>(squeeze, expand3x3, 3, Conv2dOptions::square(1, 1)));
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    const Var<T, D> s = relu(squeeze_->forward(x));
    return concat<T, D>({relu(expand1x1_->forward(s)), relu(expand3x3_->forward(s))}, 1);
  }

 private:
  std::shared_ptr<Conv2d<T, D>> squeeze_, expand1x1_, expand3x3_;
};

enum class SqueezeNetVersion { v1_0, v1_1 };

struct SqueezeNetOptions {
  std::int64_t num_classes = 1000;
  double dropout = 0.5;
};

template <class T = float, class D = Cpu>
class SqueezeNet : public Sequential<T, D> {
 public:
  explicit SqueezeNet(SqueezeNetVersion version, SqueezeNetOptions options = {}) {
    // After the stem (conv, ReLU): Fire modules as {squeeze, expand}, with {0, 0} for a max-pool.
    struct Stage {
      std::int64_t squeeze, expand;
    };
    const bool v1_0 = version == SqueezeNetVersion::v1_0;
    const std::vector<Stage> stages =
        v1_0 ? std::vector<Stage>{{0, 0},    {16, 64},  {16, 64},  {32, 128}, {0, 0},   {32, 128},
                                  {48, 192}, {48, 192}, {64, 256}, {0, 0},    {64, 256}}
             : std::vector<Stage>{{0, 0}, {16, 64},  {16, 64},  {0, 0},    {32, 128}, {32, 128},
                                  {0, 0}, {48, 192}, {48, 192}, {64, 256}, {64, 256}};
    std::int64_t channels = v1_0 ? 96 : 64;
    auto features = make<Sequential<T, D>>();
    features->push_back(detail::squeezenet_conv<T, D>(3, channels, v1_0 ? 7 : 3, Conv2dOptions::square(2)));
    features->push_back(make<ReLU<T, D>>());
    Pool2dOptions pool = Pool2dOptions::square(3, 2);
    pool.ceil_mode = true;
    for (const auto& [squeeze, expand] : stages) {
      if (squeeze == 0) {
        features->push_back(make<MaxPool2d<T, D>>(pool));
        continue;
      }
      features->push_back(make<Fire<T, D>>(channels, squeeze, expand, expand));
      channels = 2 * expand;
    }
    auto final_conv = make<Conv2d<T, D>>(channels, options.num_classes, 1);
    init::on_host(final_conv->weight.value(), [](Tensor<T>& w) { init::normal(w, 0.0, 0.01); });
    final_conv->bias.value().fill(T(0));
    this->push_back("features", features);
    this->push_back("classifier", make<Sequential<T, D>>(std::initializer_list<std::shared_ptr<Module<T, D>>>{
                                      make<Dropout<T, D>>(options.dropout), final_conv, make<ReLU<T, D>>(),
                                      make<AdaptiveAvgPool2d<T, D>>(1)}));
    this->push_back("flatten", make<Flatten<T, D>>(1));
  }
};

template <class T = float, class D = Cpu>
std::shared_ptr<SqueezeNet<T, D>> squeezenet1_0(SqueezeNetOptions options = {}) {
  return std::make_shared<SqueezeNet<T, D>>(SqueezeNetVersion::v1_0, options);
}
template <class T = float, class D = Cpu>
std::shared_ptr<SqueezeNet<T, D>> squeezenet1_1(SqueezeNetOptions options = {}) {
  return std::make_shared<SqueezeNet<T, D>>(SqueezeNetVersion::v1_1, options);
}

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::Fire)
PTRAIN_PREBUILT_MODELS_FD(ptrain::SqueezeNet)
