#pragma once
// sum and mean of a whole tensor on a device other than Cpu (HostEmulated, Cuda): the CPU ops'
// checks, the blocked double sum of kernels/indexed/reduce.hpp through executor_for<D>. The
// incoming gradient stays on the device: backward broadcasts it in a kernel.
#include <cstdint>
#include <utility>

#include "ptrain/autograd/ops/reduce.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"

namespace ptrain {

namespace detail {
// out[i] = factor * g[0], g a one-element device tensor (the gradient of a scalar).
template <class T>
struct BroadcastScaledScalar {
  const T* g;
  double factor;
  T* out;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    out[i] = kernels::from_accumulate<T>(
        static_cast<accumulate_t<T>>(factor * static_cast<double>(kernels::to_accumulate(g[0]))));
  }
};

template <class T, class D>
Var<T, D> device_reduce_all(const Var<T, D>& x, double factor, const char* op) {
  Tensor<T, D> y(Shape{});
  kernels::indexed::sum_all(kernels::executor_for<D>{}, x.value().data(), x.numel(), factor, y.data());
  return make_var<T, D>(std::move(y), {x}, op, [factor](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::executor_for<D>{}.indexed(gx.numel(), BroadcastScaledScalar<T>{self.grad.data(), factor, gx.data()});
    self.inputs[0]->accumulate(std::move(gx));
  });
}
}  // namespace detail

template <class T, kernels::ExecutorDevice D>
Var<T, D> sum(const Var<T, D>& x) {
  return detail::device_reduce_all(x, 1.0, "sum");
}

template <class T, kernels::ExecutorDevice D>
Var<T, D> mean(const Var<T, D>& x) {
  detail::check_mean_input(x.shape());
  return detail::device_reduce_all(x, 1.0 / static_cast<double>(x.numel()), "mean");
}

}  // namespace ptrain
