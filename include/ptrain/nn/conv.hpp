#pragma once
#include "ptrain/autograd/ops/conv.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

// nn.Conv2d with square or rectangular kernels; weight [out, in/groups, kh, kw]. Options come by
// reference: GCC 12.2 with AVX-512 (-march=native here) miscompiles this 56-byte aggregate passed
// by value (SLP vectorisation stores a broadcast over pad_h), so a 1x1 conv got pad_h = 1.
template <class T = float>
class Conv2d : public Module<T> {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel, const Conv2dOptions& options = {},
         bool bias = true)
      : Conv2d(in_channels, out_channels, kernel, kernel, options, bias) {}
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_h, std::int64_t kernel_w,
         const Conv2dOptions& options, bool bias = true)
      : options_(options) {
    check(in_channels > 0 && out_channels > 0 && kernel_h > 0 && kernel_w > 0, "Conv2d: sizes must be positive");
    check(options.groups > 0 && in_channels % options.groups == 0 && out_channels % options.groups == 0,
          "Conv2d: in_channels ", in_channels, " and out_channels ", out_channels, " must divide by groups ",
          options.groups);
    Tensor<T> w({out_channels, in_channels / options.groups, kernel_h, kernel_w});
    Tensor<T> b = bias ? Tensor<T>({out_channels}) : Tensor<T>();
    init::default_layer_init(w, &b);
    weight = this->register_parameter("weight", w);
    if (bias) this->bias = this->register_parameter("bias", b);
  }
  Var<T> forward(const Var<T>& x) override { return conv2d(x, weight, bias, options_); }
  const Conv2dOptions& options() const { return options_; }

  Var<T> weight, bias;

 private:
  Conv2dOptions options_;
};

}  // namespace ptrain
