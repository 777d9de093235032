#pragma once
// conv2d and conv_transpose2d on any device, as torch.nn.functional's (kernels through
// kernels/conv.hpp): x [N, C, H, W]; conv2d's weight
// [K, C/groups, kh, kw] gives [N, K, OH, OW], conv_transpose2d's weight [C, K/groups, kh, kw]
// gives [N, K, OH, OW] too; bias [K] or undefined.
#include <cstdint>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/conv.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/geometry/conv.hpp"
#include "ptrain/core/prebuilt.hpp"

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

// Defaults are nn.ConvTranspose2d's. output_pad adds rows and columns at the bottom and right of
// the output (PyTorch's output_padding, to pick among the sizes a strided input could have had);
// it must be smaller than the stride.
struct ConvTranspose2dOptions {
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t output_pad_h = 0, output_pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;

  static ConvTranspose2dOptions square(std::int64_t stride = 1, std::int64_t pad = 0, std::int64_t output_pad = 0,
                                       std::int64_t dilation = 1, std::int64_t groups = 1) {
    return {stride, stride, pad, pad, output_pad, output_pad, dilation, dilation, groups};
  }
};

inline kernels::Conv2dGeometry conv2d_geometry(const Shape& x, const Shape& weight, const Conv2dOptions& o) {
  return kernels::make_conv2d_geometry(x, weight, o.stride_h, o.stride_w, o.pad_h, o.pad_w, o.dilation_h, o.dilation_w,
                                       o.groups);
}
// The geometry of the convolution that conv_transpose2d transposes (see conv_transpose.hpp).
inline kernels::Conv2dGeometry conv_transpose2d_geometry(const Shape& x, const Shape& weight,
                                                         const ConvTranspose2dOptions& o) {
  return kernels::make_conv_transpose2d_geometry(x, weight, o.stride_h, o.stride_w, o.pad_h, o.pad_w, o.output_pad_h,
                                                 o.output_pad_w, o.dilation_h, o.dilation_w, o.groups);
}

namespace detail {
// The output y of a convolution-like op of (x, weight[, bias]). Backward allocates the gradients
// that are needed and lets kernel(x, w, gy, gx, gw, gb) write them (null for the others).
template <class T, class D, class Kernel>
Var<T, D> make_conv_var(Tensor<T, D> y, const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias,
                        const char* op, Kernel kernel) {
  const bool has_bias = bias.defined();
  std::vector<Var<T, D>> inputs{x, weight};
  if (has_bias) inputs.push_back(bias);
  return make_var<T, D>(std::move(y), std::move(inputs), op, [has_bias, kernel](Node<T, D>& self) {
    const bool need_x = self.input_needs_grad(0), need_w = self.input_needs_grad(1);
    const bool need_b = has_bias && self.input_needs_grad(2);
    Tensor<T, D> gx, gw, gb;
    if (need_x) gx = Tensor<T, D>(self.inputs[0]->value.shape());
    if (need_w) gw = Tensor<T, D>(self.inputs[1]->value.shape());
    if (need_b) gb = Tensor<T, D>(self.inputs[2]->value.shape());
    kernel(self.inputs[0]->value.data(), self.inputs[1]->value.data(), self.grad.data(), need_x ? gx.data() : nullptr,
           need_w ? gw.data() : nullptr, need_b ? gb.data() : nullptr);
    if (need_x) self.inputs[0]->accumulate(std::move(gx));
    if (need_w) self.inputs[1]->accumulate(std::move(gw));
    if (need_b) self.inputs[2]->accumulate(std::move(gb));
  });
}

// bias is undefined or holds one value per output channel.
template <class T, class D>
void check_conv_bias(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias, std::int64_t channels,
                     const char* op) {
  if (bias.defined())
    check(bias.shape() == Shape{channels}, op, ": bias ", bias.shape(), " for weight ", weight.shape(), " and input ",
          x.shape(), ", expected [", channels, "]");
}

// conv2d's checks on its arguments, on any device; its geometry.
template <class T, class D>
kernels::Conv2dGeometry checked_conv2d_geometry(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias,
                                                const Conv2dOptions& options) {
  check(x.defined() && weight.defined(), "conv2d: input and weight must be defined");
  const kernels::Conv2dGeometry g = conv2d_geometry(x.shape(), weight.shape(), options);
  check_conv_bias(x, weight, bias, g.out_channels, "conv2d");
  return g;
}

// conv_transpose2d's checks on its arguments, on any device; the geometry of the convolution it
// transposes.
template <class T, class D>
kernels::Conv2dGeometry checked_conv_transpose2d_geometry(const Var<T, D>& x, const Var<T, D>& weight,
                                                          const Var<T, D>& bias,
                                                          const ConvTranspose2dOptions& options) {
  check(x.defined() && weight.defined(), "conv_transpose2d: input and weight must be defined");
  const kernels::Conv2dGeometry g = conv_transpose2d_geometry(x.shape(), weight.shape(), options);
  check_conv_bias(x, weight, bias, g.in_channels, "conv_transpose2d");
  return g;
}
}  // namespace detail

template <class T, Device D>
Var<T, D> conv2d(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias = {},
                 const Conv2dOptions& options = {}) {
  const kernels::Conv2dGeometry g = detail::checked_conv2d_geometry(x, weight, bias, options);
  Tensor<T, D> y({g.batch, g.out_channels, g.out_h, g.out_w});
  kernels::conv2d_forward(kernels::executor_for<D>{}, g, x.value().data(), weight.value().data(),
                          bias.defined() ? bias.value().data() : nullptr, y.data());
  return detail::make_conv_var<T, D>(std::move(y), x, weight, bias, "conv2d",
                                     [g](const T* xd, const T* wd, const T* gy, T* gx, T* gw, T* gb) {
                                       kernels::conv2d_backward(kernels::executor_for<D>{}, g, xd, wd, gy, gx, gw, gb);
                                     });
}

// Output size (H - 1) * stride - 2 * pad + dilation * (k - 1) + output_pad + 1 along each axis.
template <class T, Device D>
Var<T, D> conv_transpose2d(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias = {},
                           const ConvTranspose2dOptions& options = {}) {
  const kernels::Conv2dGeometry g = detail::checked_conv_transpose2d_geometry(x, weight, bias, options);
  Tensor<T, D> y({g.batch, g.in_channels, g.in_h, g.in_w});
  kernels::conv_transpose2d_forward(kernels::executor_for<D>{}, g, x.value().data(), weight.value().data(),
                                    bias.defined() ? bias.value().data() : nullptr, y.data());
  return detail::make_conv_var<T, D>(std::move(y), x, weight, bias, "conv_transpose2d",
                                     [g](const T* xd, const T* wd, const T* gy, T* gx, T* gw, T* gb) {
                                       kernels::conv_transpose2d_backward(kernels::executor_for<D>{}, g, xd, wd, gy, gx,
                                                                          gw, gb);
                                     });
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::conv2d)
PTRAIN_PREBUILT_OPS_FD(ptrain::conv_transpose2d)
