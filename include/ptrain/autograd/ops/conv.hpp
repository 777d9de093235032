#pragma once
// conv2d, as torch.nn.functional.conv2d: x [N, C, H, W], weight [K, C/groups, kh, kw],
// bias [K] or undefined; output [N, K, OH, OW].
#include <cstdint>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/cpu/conv.hpp"

namespace ptrain {

// Defaults are nn.Conv2d's; set fields by name for the rest: Conv2dOptions{.pad_h = 1, .pad_w = 0}.
struct Conv2dOptions {
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;

  // The same stride, padding and dilation along both axes (nn.Conv2d(..., stride=s, padding=p)).
  static Conv2dOptions square(std::int64_t stride = 1, std::int64_t pad = 0, std::int64_t dilation = 1,
                              std::int64_t groups = 1) {
    return {stride, stride, pad, pad, dilation, dilation, groups};
  }
};

inline kernels::Conv2dGeometry conv2d_geometry(const Shape& x, const Shape& weight, const Conv2dOptions& o) {
  return kernels::make_conv2d_geometry(x, weight, o.stride_h, o.stride_w, o.pad_h, o.pad_w, o.dilation_h,
                                       o.dilation_w, o.groups);
}

template <class T>
Var<T> conv2d(const Var<T>& x, const Var<T>& weight, const Var<T>& bias = {}, const Conv2dOptions& options = {}) {
  check(x.defined() && weight.defined(), "conv2d: input and weight must be defined");
  const kernels::Conv2dGeometry g = conv2d_geometry(x.shape(), weight.shape(), options);
  const bool has_bias = bias.defined();
  if (has_bias)
    check(bias.shape() == Shape{g.out_channels}, "conv2d: bias ", bias.shape(), " for weight ", weight.shape(),
          ", expected [", g.out_channels, "]");
  Tensor<T> y({g.batch, g.out_channels, g.out_h, g.out_w});
  kernels::conv2d_forward<T>(g, x.value().data(), weight.value().data(), has_bias ? bias.value().data() : nullptr,
                             y.data());
  std::vector<Var<T>> inputs{x, weight};
  if (has_bias) inputs.push_back(bias);
  return make_var<T>(std::move(y), std::move(inputs), "conv2d", [g, has_bias](Node<T>& self) {
    const bool need_x = self.input_needs_grad(0), need_w = self.input_needs_grad(1);
    const bool need_b = has_bias && self.input_needs_grad(2);
    Tensor<T> gx, gw, gb;
    if (need_x) gx = Tensor<T>(self.inputs[0]->value.shape());
    if (need_w) gw = Tensor<T>(self.inputs[1]->value.shape());
    if (need_b) gb = Tensor<T>(self.inputs[2]->value.shape());
    kernels::conv2d_backward<T>(g, self.inputs[0]->value.data(), self.inputs[1]->value.data(), self.grad.data(),
                                need_x ? gx.data() : nullptr, need_w ? gw.data() : nullptr,
                                need_b ? gb.data() : nullptr);
    if (need_x) self.inputs[0]->accumulate(std::move(gx));
    if (need_w) self.inputs[1]->accumulate(std::move(gw));
    if (need_b) self.inputs[2]->accumulate(std::move(gb));
  });
}

}  // namespace ptrain
