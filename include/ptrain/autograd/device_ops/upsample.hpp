#pragma once
// upsample (nearest and bilinear) on a device other than Cpu (HostEmulated, Cuda): the CPU op's
// checks and geometry, the gather kernels of kernels/indexed/upsample.hpp through executor_for<D>.
// The interpolation taps go to the device once per call and serve forward and backward.
#include <utility>

#include "ptrain/autograd/ops/upsample.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/upsample.hpp"

namespace ptrain {

template <class T, kernels::ExecutorDevice D>
Var<T, D> upsample(const Var<T, D>& x, const UpsampleOptions& options) {
  const kernels::Interpolation2d g = detail::checked_upsample_geometry(x.shape(), options);
  const kernels::executor_for<D> ex;
  const auto taps = kernels::indexed::interpolation_taps(ex, g);
  Tensor<T, D> y({x.size(0), x.size(1), g.out_h(), g.out_w()});
  kernels::indexed::interpolate2d_forward<T>(ex, g, taps, x.value().data(), y.data());
  return make_var<T, D>(std::move(y), {x}, "upsample", [g, taps](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::indexed::interpolate2d_backward<T>(kernels::executor_for<D>{}, g, taps, self.grad.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
