#pragma once
// Reductions of a whole tensor to a scalar (shape []) on any device: sum and mean, summed in
// double (kernels/reduce.hpp). The incoming gradient stays where it is: backward broadcasts it in
// a kernel.
#include <utility>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/reduce.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

namespace detail {
inline void check_mean_input(const Shape& x) {
  check(x.numel() > 0, "mean: the input of shape ", x, " has no elements");
}

template <class T, Device D>
Var<T, D> reduce_all(const Var<T, D>& x, double factor, const char* op) {
  Tensor<T, D> y(Shape{});
  kernels::sum_all(kernels::executor_for<D>{}, x.value().data(), x.numel(), factor, y.data());
  return make_var<T, D>(std::move(y), {x}, op, [factor](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::fill_scaled_scalar(kernels::executor_for<D>{}, self.grad.data(), factor, gx.data(), gx.numel());
    self.inputs[0]->accumulate(std::move(gx));
  });
}
}  // namespace detail

// The sum of all elements, as a scalar of shape [].
template <class T, Device D>
Var<T, D> sum(const Var<T, D>& x) {
  return detail::reduce_all(x, 1.0, "sum");
}

// The mean of all elements, as a scalar of shape []; an empty tensor is an error.
template <class T, Device D>
Var<T, D> mean(const Var<T, D>& x) {
  detail::check_mean_input(x.shape());
  return detail::reduce_all(x, 1.0 / static_cast<double>(x.numel()), "mean");
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::sum)
PTRAIN_PREBUILT_OPS_FD(ptrain::mean)
