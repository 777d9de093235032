#pragma once
// Activations: relu, sigmoid, softmax and log_softmax (over any dimension, numerically stable).
#include "ptrain/autograd/detail/dim.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/cpu/softmax.hpp"
#include "ptrain/kernels/functors.hpp"

namespace ptrain {

template <class T>
Var<T> relu(const Var<T>& x) {
  Tensor<T> y = kernels::map(x.value(), kernels::Relu{});
  return make_var<T>(y, {x}, "relu", [y](Node<T>& self) {
    self.inputs[0]->accumulate(kernels::map2(y, self.grad, kernels::ReluBackward{}));
  });
}

template <class T>
Var<T> sigmoid(const Var<T>& x) {
  Tensor<T> y = kernels::map(x.value(), kernels::Sigmoid{});
  return make_var<T>(y, {x}, "sigmoid", [y](Node<T>& self) {
    self.inputs[0]->accumulate(kernels::map2(y, self.grad, kernels::SigmoidBackward{}));
  });
}

namespace detail {
// softmax's layout on any device: x seen as [outer, extent of dim, inner].
inline kernels::ReductionLayout softmax_layout(const Shape& x, int dim, const char* op) {
  return kernels::ReductionLayout::around(x, wrap_dim(dim, x, op));
}

template <class T>
Var<T> softmax_op(const Var<T>& x, int dim, bool take_log, const char* op) {
  const auto layout = softmax_layout(x.shape(), dim, op);
  Tensor<T> y(x.shape());
  kernels::softmax_forward(x.value().data(), y.data(), layout, take_log);
  return make_var<T>(y, {x}, op, [y, layout, take_log](Node<T>& self) {
    Tensor<T> gx(y.shape());
    kernels::softmax_backward(y.data(), self.grad.data(), gx.data(), layout, take_log);
    self.inputs[0]->accumulate(std::move(gx));
  });
}
}  // namespace detail

// exp(x) / sum(exp(x)) along dim (negative counts from the back), computed as exp(x - max).
template <class T>
Var<T> softmax(const Var<T>& x, int dim) {
  return detail::softmax_op(x, dim, false, "softmax");
}

// x - log(sum(exp(x))) along dim, without forming exp(x) unshifted.
template <class T>
Var<T> log_softmax(const Var<T>& x, int dim) {
  return detail::softmax_op(x, dim, true, "log_softmax");
}

}  // namespace ptrain
