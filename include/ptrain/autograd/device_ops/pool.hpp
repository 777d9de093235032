#pragma once
// max_pool2d, avg_pool2d and adaptive_avg_pool2d on a device other than Cpu (HostEmulated, Cuda):
// the CPU ops' checks and geometry, the gather kernels of kernels/indexed/pool.hpp through executor_for<D>.
#include <cstdint>
#include <utility>

#include "ptrain/autograd/ops/pool.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/pool.hpp"

namespace ptrain {

template <class T, kernels::ExecutorDevice D>
Var<T, D> max_pool2d(const Var<T, D>& x, const Pool2dOptions& options) {
  const kernels::Pool2dGeometry g = detail::checked_max_pool2d_geometry(x.shape(), options);
  Tensor<T, D> y({g.batch, g.channels, g.out_h, g.out_w});
  // The argmax of each window, as an offset within its input plane, kept on the device.
  Tensor<std::int32_t, D> index(y.shape());
  kernels::indexed::max_pool2d_forward(kernels::executor_for<D>{}, g, x.value().data(), y.data(), index.data());
  return make_var<T, D>(std::move(y), {x}, "max_pool2d", [g, index](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::indexed::max_pool2d_backward(kernels::executor_for<D>{}, g, self.grad.data(), index.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// nn.MaxPool2d(kernel, stride, padding) with a square window; stride 0 means kernel.
template <class T, kernels::ExecutorDevice D>
Var<T, D> max_pool2d(const Var<T, D>& x, std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0) {
  return max_pool2d(x, Pool2dOptions::square(kernel, stride, padding));
}

template <class T, kernels::ExecutorDevice D>
Var<T, D> avg_pool2d(const Var<T, D>& x, const Pool2dOptions& options) {
  const kernels::Pool2dGeometry g = pool2d_geometry(x.shape(), options, "avg_pool2d");
  Tensor<T, D> y({g.batch, g.channels, g.out_h, g.out_w});
  kernels::indexed::avg_pool2d_forward(kernels::executor_for<D>{}, g, x.value().data(), y.data());
  return make_var<T, D>(std::move(y), {x}, "avg_pool2d", [g](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::indexed::avg_pool2d_backward(kernels::executor_for<D>{}, g, self.grad.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// nn.AvgPool2d(kernel, stride, padding) with a square window, count_include_pad=True.
template <class T, kernels::ExecutorDevice D>
Var<T, D> avg_pool2d(const Var<T, D>& x, std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0) {
  return avg_pool2d(x, Pool2dOptions::square(kernel, stride, padding));
}

// Output [N, C, out_h, out_w] averaging adaptive windows, as the CPU op.
template <class T, kernels::ExecutorDevice D>
Var<T, D> adaptive_avg_pool2d(const Var<T, D>& x, std::int64_t out_h, std::int64_t out_w) {
  detail::check_adaptive_avg_pool2d(x.shape(), out_h, out_w);
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor<T, D> y({N, C, out_h, out_w});
  kernels::indexed::adaptive_avg_pool2d_forward(kernels::executor_for<D>{}, N * C, H, W, out_h, out_w,
                                                x.value().data(), y.data());
  return make_var<T, D>(std::move(y), {x}, "adaptive_avg_pool2d", [N, C, H, W, out_h, out_w](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::indexed::adaptive_avg_pool2d_backward(kernels::executor_for<D>{}, N * C, H, W, out_h, out_w,
                                                   self.grad.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
