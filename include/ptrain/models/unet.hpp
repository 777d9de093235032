#pragma once
// UNet (Ronneberger et al., 2015) as the common PyTorch implementation builds it (milesial's
// Pytorch-UNet, transposed-convolution variant), with its parameter names: inc.double_conv.0.weight,
// down1.maxpool_conv.1.double_conv.0.weight, up1.up.weight, up1.conv.double_conv.0.weight, outc.conv.weight.
#include <memory>
#include <string>
#include <vector>

#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/batch_norm.hpp"
#include "ptrain/nn/conv.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

struct UNetOptions {
  std::int64_t in_channels = 1;
  std::int64_t classes = 2;
  int levels = 5;                // resolutions, the input's included: levels - 1 poolings
  std::int64_t base_width = 16;  // channels at the first level, doubled at each level below it
  bool batch_norm = true;        // 3x3 conv without bias + BatchNorm2d + ReLU; else conv with bias + ReLU
};

namespace detail {
// (3x3 conv => [BN] => ReLU) * 2, as milesial's DoubleConv: a module holding "double_conv".
template <class T, class D>
std::shared_ptr<Sequential<T, D>> unet_double_conv(std::int64_t in, std::int64_t out, bool batch_norm) {
  auto layers = make<Sequential<T, D>>();
  for (int i = 0; i < 2; ++i) {
    layers->push_back(make<Conv2d<T, D>>(i == 0 ? in : out, out, 3, Conv2dOptions::square(1, 1), !batch_norm));
    if (batch_norm) layers->push_back(make<BatchNorm2d<T, D>>(out));
    layers->push_back(make<ReLU<T, D>>());
  }
  auto block = make<Sequential<T, D>>();
  block->push_back("double_conv", layers);
  return block;
}
}  // namespace detail

// One step up: the level below is doubled in size by a 2x2 stride-2 transposed convolution that
// halves its channels, joined after the skip connection's channels, and convolved twice.
template <class T = float, class D = Cpu>
class UNetUp : public Module<T, D> {
 public:
  UNetUp(std::int64_t in, std::int64_t out, bool batch_norm) {
    up_ = this->register_module("up", make<ConvTranspose2d<T, D>>(in, in / 2, 2, ConvTranspose2dOptions::square(2)));
    conv_ = this->register_module("conv", detail::unet_double_conv<T, D>(in, out, batch_norm));
  }
  Var<T, D> forward(const Var<T, D>& below, const Var<T, D>& skip) {
    return conv_->forward(concat<T, D>({skip, up_->forward(below)}, 1));
  }
  Var<T, D> forward(const Var<T, D>&) override {
    fail("UNetUp needs the level below and the skip connection: call forward(below, skip)");
  }

 private:
  std::shared_ptr<ConvTranspose2d<T, D>> up_;
  std::shared_ptr<Sequential<T, D>> conv_;
};

// Input [N, in_channels, H, W] with H and W divisible by 2^(levels - 1); output the class scores
// [N, classes, H, W] (for cross_entropy, or binary_cross_entropy_with_logits with one class).
template <class T = float, class D = Cpu>
class UNet : public Module<T, D> {
 public:
  explicit UNet(const UNetOptions& options = {}) : options_(options) {
    check(options.levels >= 1 && options.levels <= 16, "UNet: levels must be in [1, 16], got ", options.levels);
    check(options.in_channels > 0 && options.classes > 0 && options.base_width > 0,
          "UNet: in_channels, classes and base_width must be positive, got ", options.in_channels, ", ",
          options.classes, ", ", options.base_width);
    const auto width = [&](int level) { return options.base_width << level; };
    const bool bn = options.batch_norm;
    inc_ = this->register_module("inc", detail::unet_double_conv<T, D>(options.in_channels, width(0), bn));
    for (int l = 1; l < options.levels; ++l) {
      auto pool_conv = make<Sequential<T, D>>();
      pool_conv->push_back(make<MaxPool2d<T, D>>(2));
      pool_conv->push_back(detail::unet_double_conv<T, D>(width(l - 1), width(l), bn));
      auto down = make<Sequential<T, D>>();
      down->push_back("maxpool_conv", pool_conv);
      downs_.push_back(this->register_module("down" + std::to_string(l), down));
    }
    for (int k = 1; k < options.levels; ++k) {
      const int l = options.levels - k;
      ups_.push_back(this->register_module("up" + std::to_string(k), make<UNetUp<T, D>>(width(l), width(l - 1), bn)));
    }
    auto outc = make<Sequential<T, D>>();
    outc->push_back("conv", make<Conv2d<T, D>>(width(0), options.classes, 1));
    outc_ = this->register_module("outc", outc);
  }

  Var<T, D> forward(const Var<T, D>& x) override {
    const std::int64_t multiple = std::int64_t{1} << (options_.levels - 1);
    check(x.shape().rank() == 4 && x.size(1) == options_.in_channels, "UNet: input must be [N, ",
          options_.in_channels, ", H, W], got ", x.shape());
    check(x.size(2) % multiple == 0 && x.size(3) % multiple == 0, "UNet: input ", x.shape(), " has H and W not ",
          "divisible by ", multiple, " = 2^(levels - 1), which ", options_.levels, " levels need");
    std::vector<Var<T, D>> skips{inc_->forward(x)};
    for (const auto& down : downs_) skips.push_back(down->forward(skips.back()));
    Var<T, D> h = skips.back();
    skips.pop_back();
    for (const auto& up : ups_) {
      h = up->forward(h, skips.back());
      skips.pop_back();
    }
    return outc_->forward(h);
  }
  const UNetOptions& options() const { return options_; }

 private:
  UNetOptions options_;
  std::shared_ptr<Sequential<T, D>> inc_, outc_;
  std::vector<std::shared_ptr<Sequential<T, D>>> downs_;
  std::vector<std::shared_ptr<UNetUp<T, D>>> ups_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::UNetUp)
PTRAIN_PREBUILT_MODELS_FD(ptrain::UNet)
