#pragma once
// VGG-16 and VGG-16-BN as torchvision builds them (same parameter names, shapes and order), and
// VGG-F: VGG-16 whose classifier narrows in two more steps. Each is a Sequential of torchvision's
// children (features, avgpool, a parameter-free flatten, classifier), so a pipeline can cut it.
#include <memory>
#include <vector>

#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/batch_norm.hpp"
#include "ptrain/nn/conv.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

struct VggOptions {
  std::int64_t num_classes = 1000;
  double dropout = 0.5;
};

// Output channels of each 3x3 convolution of `features`; vgg_pool marks a 2x2 max-pool.
inline constexpr std::int64_t vgg_pool = 0;
inline const std::vector<std::int64_t> vgg16_config{
    64, 64, vgg_pool, 128, 128, vgg_pool, 256, 256, 256, vgg_pool, 512, 512, 512, vgg_pool, 512, 512, 512, vgg_pool};
// Hidden widths of the classifier: torchvision's VGG (25088 -> 4096 -> 4096 -> classes), and
// VGG-F's, which narrows progressively (25088 -> 4096 -> 4096 -> 1024 -> 256 -> classes).
inline const std::vector<std::int64_t> vgg_classifier_widths{4096, 4096};
inline const std::vector<std::int64_t> vgg_f_classifier_widths{4096, 4096, 1024, 256};

template <class T = float, class D = Cpu>
class Vgg : public Sequential<T, D> {
 public:
  // torchvision's VGG: features (conv [+ BatchNorm] + ReLU, max-pools), AdaptiveAvgPool2d(7),
  // classifier of Linear + ReLU + Dropout per hidden width, then Linear to the classes.
  Vgg(const std::vector<std::int64_t>& config, bool batch_norm, const std::vector<std::int64_t>& classifier_widths,
      VggOptions options = {}) {
    auto features = make<Sequential<T, D>>();
    std::int64_t in = 3;
    for (const std::int64_t out : config) {
      if (out == vgg_pool) {
        features->push_back(make<MaxPool2d<T, D>>(2, 2));
        continue;
      }
      auto conv = make<Conv2d<T, D>>(in, out, 3, Conv2dOptions::square(1, 1));
      init::on_host(conv->weight.value(), [](Tensor<T>& w) { init::kaiming_normal_fan_out(w); });
      conv->bias.value().fill(T(0));
      features->push_back(conv);
      if (batch_norm) features->push_back(make<BatchNorm2d<T, D>>(out));
      features->push_back(make<ReLU<T, D>>());
      in = out;
    }
    auto classifier = make<Sequential<T, D>>();
    std::int64_t width = in * 7 * 7;
    for (const std::int64_t hidden : classifier_widths) {
      classifier->push_back(linear(width, hidden));
      classifier->push_back(make<ReLU<T, D>>());
      classifier->push_back(make<Dropout<T, D>>(options.dropout));
      width = hidden;
    }
    classifier->push_back(linear(width, options.num_classes));
    this->push_back("features", features);
    this->push_back("avgpool", make<AdaptiveAvgPool2d<T, D>>(7));
    this->push_back("flatten", make<Flatten<T, D>>(1));
    this->push_back("classifier", classifier);
  }

 private:
  static std::shared_ptr<Linear<T, D>> linear(std::int64_t in, std::int64_t out) {
    auto fc = make<Linear<T, D>>(in, out);
    init::on_host(fc->weight.value(), [](Tensor<T>& w) { init::normal(w, 0.0, 0.01); });
    fc->bias.value().fill(T(0));
    return fc;
  }
};

template <class T = float, class D = Cpu>
std::shared_ptr<Vgg<T, D>> vgg16(VggOptions options = {}) {
  return std::make_shared<Vgg<T, D>>(vgg16_config, false, vgg_classifier_widths, options);
}
template <class T = float, class D = Cpu>
std::shared_ptr<Vgg<T, D>> vgg16_bn(VggOptions options = {}) {
  return std::make_shared<Vgg<T, D>>(vgg16_config, true, vgg_classifier_widths, options);
}
// VGG-F: VGG-16 (no batch norm) with the classifier widths of vgg_f_classifier_widths.
template <class T = float, class D = Cpu>
std::shared_ptr<Vgg<T, D>> vgg_f(VggOptions options = {}) {
  return std::make_shared<Vgg<T, D>>(vgg16_config, false, vgg_f_classifier_widths, options);
}

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::Vgg)
