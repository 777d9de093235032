#pragma once
// Activations on any device: relu, sigmoid and tanh (backward reads the output), gelu (erf and tanh forms,
// backward reads the input), softmax and log_softmax
// (over any dimension, numerically stable). Kernels through kernels/elementwise.hpp and
// kernels/softmax.hpp.
#include <utility>

#include "ptrain/autograd/detail/dim.hpp"
#include "ptrain/autograd/detail/elementwise.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/softmax.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

template <class T, Device D>
Var<T, D> relu(const Var<T, D>& x) {
  return detail::map_backward_from_output(x, kernels::Relu{}, kernels::ReluBackward{}, "relu");
}

template <class T, Device D>
Var<T, D> sigmoid(const Var<T, D>& x) {
  return detail::map_backward_from_output(x, kernels::Sigmoid{}, kernels::SigmoidBackward{}, "sigmoid");
}

template <class T, Device D>
Var<T, D> tanh(const Var<T, D>& x) {
  return detail::map_backward_from_output(x, kernels::Tanh{}, kernels::TanhBackward{}, "tanh");
}

// torch.nn.functional.gelu(x, approximate='none' or 'tanh'): tanh_form picks the second.
template <class T, Device D>
Var<T, D> gelu(const Var<T, D>& x, bool tanh_form = false) {
  return detail::map_backward_from_input(x, kernels::Gelu{tanh_form}, kernels::GeluBackward{tanh_form}, "gelu");
}

namespace detail {
// softmax's layout: x seen as [outer, extent of dim, inner].
inline kernels::ReductionLayout softmax_layout(const Shape& x, int dim, const char* op) {
  return kernels::ReductionLayout::around(x, wrap_dim(dim, x, op));
}

template <class T, Device D>
Var<T, D> softmax_op(const Var<T, D>& x, int dim, bool take_log, const char* op) {
  const auto layout = softmax_layout(x.shape(), dim, op);
  Tensor<T, D> y(x.shape());
  kernels::softmax_forward(kernels::executor_for<D>{}, x.value().data(), y.data(), layout, take_log);
  return make_var<T, D>(y, {x}, op, [y, layout, take_log](Node<T, D>& self) {
    Tensor<T, D> gx(y.shape());
    kernels::softmax_backward(kernels::executor_for<D>{}, y.data(), self.grad.data(), gx.data(), layout, take_log);
    self.inputs[0]->accumulate(std::move(gx));
  });
}
}  // namespace detail

// exp(x) / sum(exp(x)) along dim (negative counts from the back), computed as exp(x - max).
template <class T, Device D>
Var<T, D> softmax(const Var<T, D>& x, int dim) {
  return detail::softmax_op(x, dim, false, "softmax");
}

// x - log(sum(exp(x))) along dim, without forming exp(x) unshifted.
template <class T, Device D>
Var<T, D> log_softmax(const Var<T, D>& x, int dim) {
  return detail::softmax_op(x, dim, true, "log_softmax");
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::relu)
PTRAIN_PREBUILT_OPS_FD(ptrain::sigmoid)
PTRAIN_PREBUILT_OPS_FD(ptrain::tanh)
PTRAIN_PREBUILT_OPS_FD(ptrain::gelu)
PTRAIN_PREBUILT_OPS_FD(ptrain::softmax)
PTRAIN_PREBUILT_OPS_FD(ptrain::log_softmax)
