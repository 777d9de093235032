#pragma once
// nn.Conv2d and nn.ConvTranspose2d: parameters named weight and bias, initialised as PyTorch's.
#include <string>
#include <type_traits>

#include "ptrain/autograd/ops/conv.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

enum class ConvKind { direct, transposed };

// Conv2d: weight [out, in/groups, kh, kw]. ConvTranspose2d: weight [in, out/groups, kh, kw]
// (UNet's up-sampling is ConvTranspose2d(c, c / 2, 2, ConvTranspose2dOptions::square(2))).
// Both draw weight and bias as _ConvNd.reset_parameters: fan_in = weight.size(1) * kh * kw.
// Options come by reference: GCC 12.2 at -O2 -march=native (AVX-512) miscompiled the by-value
// default `Conv2dOptions options = {}`, handing the constructor pad_h = 1.
template <class T, ConvKind kind, class D = Cpu>
class Convolution2d : public Module<T, D> {
 public:
  using Options = std::conditional_t<kind == ConvKind::direct, Conv2dOptions, ConvTranspose2dOptions>;
  static constexpr const char* name = kind == ConvKind::direct ? "Conv2d" : "ConvTranspose2d";

  Convolution2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel, const Options& options = {},
                bool bias = true)
      : Convolution2d(in_channels, out_channels, kernel, kernel, options, bias) {}
  Convolution2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_h, std::int64_t kernel_w,
                const Options& options, bool bias = true)
      : options_(options) {
    const std::int64_t groups = options.groups;
    check(in_channels > 0 && out_channels > 0 && kernel_h > 0 && kernel_w > 0, name,
          ": sizes must be positive, got ", in_channels, " -> ", out_channels, " channels with a ", kernel_h, " x ",
          kernel_w, " kernel");
    check(groups > 0 && in_channels % groups == 0 && out_channels % groups == 0, name, ": in_channels ",
          in_channels, " and out_channels ", out_channels, " must divide by groups ", groups);
    Tensor<T> w(kind == ConvKind::direct ? Shape{out_channels, in_channels / groups, kernel_h, kernel_w}
                                         : Shape{in_channels, out_channels / groups, kernel_h, kernel_w});
    Tensor<T> b = bias ? Tensor<T>({out_channels}) : Tensor<T>();
    init::default_layer_init(w, &b);
    weight = this->register_parameter("weight", w);
    if (bias) this->bias = this->register_parameter("bias", b);
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    if constexpr (kind == ConvKind::direct) return conv2d(x, weight, bias, options_);
    else return conv_transpose2d(x, weight, bias, options_);
  }
  const Options& options() const { return options_; }
  std::string type_name() const override { return name; }

  Var<T, D> weight, bias;

 private:
  Options options_;
};

template <class T = float, class D = Cpu>
using Conv2d = Convolution2d<T, ConvKind::direct, D>;
template <class T = float, class D = Cpu>
using ConvTranspose2d = Convolution2d<T, ConvKind::transposed, D>;

}  // namespace ptrain

PTRAIN_PREBUILT_CLASS(ptrain::Convolution2d<float, ptrain::ConvKind::direct, ptrain::Cpu>)
PTRAIN_PREBUILT_CLASS(ptrain::Convolution2d<double, ptrain::ConvKind::direct, ptrain::Cpu>)
PTRAIN_PREBUILT_CLASS(ptrain::Convolution2d<float, ptrain::ConvKind::transposed, ptrain::Cpu>)
PTRAIN_PREBUILT_CLASS(ptrain::Convolution2d<double, ptrain::ConvKind::transposed, ptrain::Cpu>)
