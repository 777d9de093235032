#pragma once
// softmax and log_softmax on a device other than Cpu (HostEmulated, Cuda): the CPU ops' layout and
// checks, the row reductions of kernels/indexed/softmax.hpp through executor_for<D>.
#include <utility>

#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/softmax.hpp"

namespace ptrain {

namespace detail {
template <class T, class D>
Var<T, D> device_softmax_op(const Var<T, D>& x, int dim, bool take_log, const char* op) {
  const auto layout = softmax_layout(x.shape(), dim, op);
  Tensor<T, D> y(x.shape());
  kernels::indexed::softmax_forward(kernels::executor_for<D>{}, x.value().data(), y.data(), layout, take_log);
  return make_var<T, D>(y, {x}, op, [y, layout, take_log](Node<T, D>& self) {
    Tensor<T, D> gx(y.shape());
    kernels::indexed::softmax_backward(kernels::executor_for<D>{}, y.data(), self.grad.data(), gx.data(), layout,
                                       take_log);
    self.inputs[0]->accumulate(std::move(gx));
  });
}
}  // namespace detail

template <class T, kernels::ExecutorDevice D>
Var<T, D> softmax(const Var<T, D>& x, int dim) {
  return detail::device_softmax_op(x, dim, false, "softmax");
}

template <class T, kernels::ExecutorDevice D>
Var<T, D> log_softmax(const Var<T, D>& x, int dim) {
  return detail::device_softmax_op(x, dim, true, "log_softmax");
}

}  // namespace ptrain
