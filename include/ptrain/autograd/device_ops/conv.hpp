#pragma once
// conv2d and conv_transpose2d on a device other than Cpu (HostEmulated, Cuda): the CPU ops' checks
// and geometry, the im2col + GEMM algorithm of kernels/indexed/conv.hpp through executor_for<D>.
#include <utility>

#include "ptrain/autograd/ops/conv.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/conv.hpp"

namespace ptrain {

// As the CPU conv2d: x [N, C, H, W], weight [K, C/groups, kh, kw], bias [K] or undefined.
template <class T, kernels::ExecutorDevice D>
Var<T, D> conv2d(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias = {},
                 const Conv2dOptions& options = {}) {
  const kernels::Conv2dGeometry g = detail::checked_conv2d_geometry(x, weight, bias, options);
  Tensor<T, D> y({g.batch, g.out_channels, g.out_h, g.out_w});
  kernels::indexed::conv2d_forward<T>(kernels::executor_for<D>{}, g, x.value().data(), weight.value().data(),
                                      bias.defined() ? bias.value().data() : nullptr, y.data());
  return detail::make_conv_var<T, D>(std::move(y), x, weight, bias, "conv2d",
                                     [g](const T* xd, const T* wd, const T* gy, T* gx, T* gw, T* gb) {
                                       kernels::indexed::conv2d_backward<T>(kernels::executor_for<D>{}, g, xd, wd,
                                                                            gy, gx, gw, gb);
                                     });
}

// As the CPU conv_transpose2d: x [N, C, H, W], weight [C, K/groups, kh, kw], bias [K] or undefined.
template <class T, kernels::ExecutorDevice D>
Var<T, D> conv_transpose2d(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias = {},
                           const ConvTranspose2dOptions& options = {}) {
  const kernels::Conv2dGeometry g = detail::checked_conv_transpose2d_geometry(x, weight, bias, options);
  Tensor<T, D> y({g.batch, g.in_channels, g.in_h, g.in_w});
  kernels::indexed::conv_transpose2d_forward<T>(kernels::executor_for<D>{}, g, x.value().data(),
                                                weight.value().data(), bias.defined() ? bias.value().data() : nullptr,
                                                y.data());
  return detail::make_conv_var<T, D>(std::move(y), x, weight, bias, "conv_transpose2d",
                                     [g](const T* xd, const T* wd, const T* gy, T* gx, T* gw, T* gb) {
                                       kernels::indexed::conv_transpose2d_backward<T>(kernels::executor_for<D>{}, g,
                                                                                      xd, wd, gy, gx, gw, gb);
                                     });
}

}  // namespace ptrain
