#pragma once
// ResNet-18/34/50 as torchvision builds them (same parameter names, shapes and order), with an
// optional CIFAR stem (3x3 stride-1 conv, no max-pool). The network is a Sequential of its
// torchvision children (plus a parameter-free flatten), so a pipeline can cut it. Each block's
// batch norms run fused with the relu (and residual add) after them (BatchNorm2d::forward_relu).
// Blocks call their layers through operator(), so a forward hook (a summary, Grad-CAM) reaches each.
// On any device D with the ops ResNet needs (Cpu, HostEmulated, Cuda): resnet50<half, Cuda>().
#include <memory>
#include <string>
#include <vector>

#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/batch_norm.hpp"
#include "ptrain/nn/conv.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

namespace detail {
// A bias-free convolution with torchvision's kaiming_normal_(mode='fan_out') weights.
template <class T, class D>
std::shared_ptr<Conv2d<T, D>> resnet_conv(std::int64_t in, std::int64_t out, std::int64_t kernel,
                                          const Conv2dOptions& options) {
  auto conv = make<Conv2d<T, D>>(in, out, kernel, options, false);
  init::on_host(conv->weight.value(), [](Tensor<T>& w) { init::kaiming_normal_fan_out(w); });
  return conv;
}
template <class T, class D>
std::shared_ptr<Conv2d<T, D>> resnet_conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride) {
  Conv2dOptions o;
  o.stride_h = o.stride_w = stride;
  o.pad_h = o.pad_w = kernel / 2;
  return resnet_conv<T, D>(in, out, kernel, o);
}
}  // namespace detail

template <class T = float, class D = Cpu>
class BasicBlock : public Module<T, D> {
 public:
  static constexpr std::int64_t expansion = 1;
  BasicBlock(std::int64_t in, std::int64_t planes, std::int64_t stride) {
    conv1_ = this->register_module("conv1", detail::resnet_conv<T, D>(in, planes, 3, stride));
    bn1_ = this->register_module("bn1", make<BatchNorm2d<T, D>>(planes));
    conv2_ = this->register_module("conv2", detail::resnet_conv<T, D>(planes, planes, 3, 1));
    bn2_ = this->register_module("bn2", make<BatchNorm2d<T, D>>(planes));
    if (stride != 1 || in != planes)
      downsample_ = this->register_module(
          "downsample", make<Sequential<T, D>>(std::initializer_list<std::shared_ptr<Module<T, D>>>{
                            detail::resnet_conv<T, D>(in, planes, 1, stride), make<BatchNorm2d<T, D>>(planes)}));
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    const Var<T, D> out = bn1_->forward_relu((*conv1_)(x));
    return bn2_->forward_relu((*conv2_)(out), downsample_ ? (*downsample_)(x) : x);
  }

 private:
  std::shared_ptr<Conv2d<T, D>> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d<T, D>> bn1_, bn2_;
  std::shared_ptr<Sequential<T, D>> downsample_;
};

template <class T = float, class D = Cpu>
class Bottleneck : public Module<T, D> {
 public:
  static constexpr std::int64_t expansion = 4;
  Bottleneck(std::int64_t in, std::int64_t planes, std::int64_t stride) {
    conv1_ = this->register_module("conv1", detail::resnet_conv<T, D>(in, planes, 1, 1));
    bn1_ = this->register_module("bn1", make<BatchNorm2d<T, D>>(planes));
    conv2_ = this->register_module("conv2", detail::resnet_conv<T, D>(planes, planes, 3, stride));
    bn2_ = this->register_module("bn2", make<BatchNorm2d<T, D>>(planes));
    conv3_ = this->register_module("conv3", detail::resnet_conv<T, D>(planes, planes * expansion, 1, 1));
    bn3_ = this->register_module("bn3", make<BatchNorm2d<T, D>>(planes * expansion));
    if (stride != 1 || in != planes * expansion)
      downsample_ = this->register_module(
          "downsample", make<Sequential<T, D>>(std::initializer_list<std::shared_ptr<Module<T, D>>>{
                            detail::resnet_conv<T, D>(in, planes * expansion, 1, stride),
                            make<BatchNorm2d<T, D>>(planes * expansion)}));
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    Var<T, D> out = bn1_->forward_relu((*conv1_)(x));
    out = bn2_->forward_relu((*conv2_)(out));
    return bn3_->forward_relu((*conv3_)(out), downsample_ ? (*downsample_)(x) : x);
  }

 private:
  std::shared_ptr<Conv2d<T, D>> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm2d<T, D>> bn1_, bn2_, bn3_;
  std::shared_ptr<Sequential<T, D>> downsample_;
};

struct ResNetOptions {
  std::int64_t num_classes = 1000;
  bool cifar_stem = false;  // 3x3 stride-1 first conv and no max-pool, for 32x32 inputs
};

template <class T, template <class, class> class Block, class D = Cpu>
class ResNet : public Sequential<T, D> {
 public:
  ResNet(const std::vector<int>& blocks_per_stage, ResNetOptions options = {}) {
    check(blocks_per_stage.size() == 4, "ResNet: expected 4 stages, got ", blocks_per_stage.size());
    if (options.cifar_stem)
      this->push_back("conv1", detail::resnet_conv<T, D>(3, 64, 3, 1));
    else {
      Conv2dOptions stem;
      stem.stride_h = stem.stride_w = 2;
      stem.pad_h = stem.pad_w = 3;
      this->push_back("conv1", detail::resnet_conv<T, D>(3, 64, 7, stem));
    }
    this->push_back("bn1", make<BatchNorm2d<T, D>>(64));
    this->push_back("relu", make<ReLU<T, D>>());
    if (!options.cifar_stem) this->push_back("maxpool", make<MaxPool2d<T, D>>(3, 2, 1));
    std::int64_t in = 64;
    const std::int64_t planes[] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      auto layer = make<Sequential<T, D>>();
      for (int b = 0; b < blocks_per_stage[stage]; ++b) {
        const std::int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        layer->push_back(make<Block<T, D>>(in, planes[stage], stride));
        in = planes[stage] * Block<T, D>::expansion;
      }
      this->push_back("layer" + std::to_string(stage + 1), layer);
    }
    this->push_back("avgpool", make<AdaptiveAvgPool2d<T, D>>(1));
    this->push_back("flatten", make<Flatten<T, D>>(1));
    this->push_back("fc", make<Linear<T, D>>(in, options.num_classes));
  }
};

template <class T = float, class D = Cpu>
std::shared_ptr<ResNet<T, BasicBlock, D>> resnet18(ResNetOptions options = {}) {
  return std::make_shared<ResNet<T, BasicBlock, D>>(std::vector<int>{2, 2, 2, 2}, options);
}
template <class T = float, class D = Cpu>
std::shared_ptr<ResNet<T, BasicBlock, D>> resnet34(ResNetOptions options = {}) {
  return std::make_shared<ResNet<T, BasicBlock, D>>(std::vector<int>{3, 4, 6, 3}, options);
}
template <class T = float, class D = Cpu>
std::shared_ptr<ResNet<T, Bottleneck, D>> resnet50(ResNetOptions options = {}) {
  return std::make_shared<ResNet<T, Bottleneck, D>>(std::vector<int>{3, 4, 6, 3}, options);
}

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::BasicBlock)
PTRAIN_PREBUILT_MODELS_FD(ptrain::Bottleneck)
PTRAIN_PREBUILT_MODEL(ptrain::ResNet<float, ptrain::BasicBlock, ptrain::Cpu>)
PTRAIN_PREBUILT_MODEL(ptrain::ResNet<double, ptrain::BasicBlock, ptrain::Cpu>)
PTRAIN_PREBUILT_MODEL(ptrain::ResNet<float, ptrain::Bottleneck, ptrain::Cpu>)
PTRAIN_PREBUILT_MODEL(ptrain::ResNet<double, ptrain::Bottleneck, ptrain::Cpu>)
