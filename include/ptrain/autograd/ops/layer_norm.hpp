#pragma once
// torch.nn.functional.layer_norm on any device: x normalised over its trailing dimensions
// (normalized_shape) to zero mean and unit (biased) variance, eps inside the square root, then
// scaled by weight and shifted by bias when given (both of shape normalized_shape). Each row's mean
// and 1 / std are kept for backward (kernels/layer_norm.hpp); the weight and bias gradients are
// column sums (kernels/reduce.hpp).
#include <cstdint>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/layer_norm.hpp"
#include "ptrain/kernels/reduce.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

namespace detail {
// The length of a normalised row, after checking x ends with normalized_shape and the affine
// parameters have that shape.
template <class V>
std::int64_t layer_norm_row_length(const Shape& x, const Shape& normalized_shape, const V& weight, const V& bias,
                                   double eps) {
  const int k = normalized_shape.rank();
  bool fits = k >= 1 && x.rank() >= k;
  for (int d = 0; fits && d < k; ++d) fits = x[x.rank() - k + d] == normalized_shape[d];
  check(fits, "layer_norm: input of shape ", x, " does not end with normalized_shape ", normalized_shape);
  check(eps >= 0.0, "layer_norm: eps ", eps, " is negative");
  if (weight.defined())
    check(weight.shape() == normalized_shape, "layer_norm: weight ", weight.shape(), " for normalized_shape ",
          normalized_shape);
  if (bias.defined())
    check(bias.shape() == normalized_shape, "layer_norm: bias ", bias.shape(), " for normalized_shape ",
          normalized_shape);
  return normalized_shape.numel();
}
}  // namespace detail

// weight and bias may be undefined (elementwise_affine=False, or bias=False).
template <class T, Device D>
Var<T, D> layer_norm(const Var<T, D>& x, const Shape& normalized_shape, const Var<T, D>& weight = {},
                     const Var<T, D>& bias = {}, double eps = 1e-5) {
  const std::int64_t n = detail::layer_norm_row_length(x.shape(), normalized_shape, weight, bias, eps);
  const std::int64_t rows = n == 0 ? 0 : x.numel() / n;
  using A = accumulate_t<T>;
  const kernels::executor_for<D> ex;
  Tensor<A, D> mean(Shape{rows}), rstd(Shape{rows});
  Tensor<T, D> y(x.shape());
  const bool has_weight = weight.defined(), has_bias = bias.defined();
  kernels::layer_norm_forward(ex, x.value().data(), has_weight ? weight.value().data() : nullptr,
                              has_bias ? bias.value().data() : nullptr, rows, n, eps, y.data(), mean.data(),
                              rstd.data());
  std::vector<Var<T, D>> inputs{x, weight, bias};
  return make_var<T, D>(std::move(y), std::move(inputs), "layer_norm",
                        [mean, rstd, rows, n, has_weight, has_bias](Node<T, D>& self) {
                          const kernels::executor_for<D> ex;
                          const T* x = self.inputs[0]->value.data();
                          const T* g = self.grad.data();
                          const T* w = has_weight ? self.inputs[1]->value.data() : nullptr;
                          const bool want_x = self.input_needs_grad(0);
                          const bool want_w = has_weight && self.input_needs_grad(1);
                          Tensor<T, D> gx = want_x ? Tensor<T, D>(self.inputs[0]->value.shape()) : Tensor<T, D>();
                          Tensor<T, D> g_xhat = want_w ? Tensor<T, D>(self.grad.shape()) : Tensor<T, D>();
                          kernels::layer_norm_backward(ex, x, g, w, mean.data(), rstd.data(), rows, n,
                                                       want_x ? gx.data() : nullptr,
                                                       want_w ? g_xhat.data() : nullptr);
                          if (want_x) self.inputs[0]->accumulate(std::move(gx));
                          if (want_w) {
                            Tensor<T, D> gw(self.inputs[1]->value.shape());
                            kernels::column_sums(ex, g_xhat.data(), rows, n, gw.data());
                            self.inputs[1]->accumulate(std::move(gw));
                          }
                          if (has_bias && self.input_needs_grad(2)) {
                            Tensor<T, D> gb(self.inputs[2]->value.shape());
                            kernels::column_sums(ex, g, rows, n, gb.data());
                            self.inputs[2]->accumulate(std::move(gb));
                          }
                        });
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::layer_norm)
