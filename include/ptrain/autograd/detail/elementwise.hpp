#pragma once
// The three shapes of elementwise op: one whose backward reads its output (relu, sigmoid), one whose
// backward reads its input (gelu), and a diagonal linear one whose backward applies the forward map
// to the gradient (scale, dropout).
#include <cstdint>
#include <utility>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"

namespace ptrain::detail {

// y = forward(x); gx = backward(y, gy), both functors of kernels/functors.hpp.
template <class T, Device D, class Forward, class Backward>
Var<T, D> map_backward_from_output(const Var<T, D>& x, Forward forward, Backward backward, const char* op) {
  Tensor<T, D> y(x.shape());
  kernels::map(kernels::executor_for<D>{}, x.value().data(), y.data(), y.numel(), forward);
  return make_var<T, D>(y, {x}, op, [y, backward](Node<T, D>& self) {
    Tensor<T, D> gx(y.shape());
    kernels::map2(kernels::executor_for<D>{}, y.data(), self.grad.data(), gx.data(), gx.numel(), backward);
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// y = forward(x); gx = backward(x, gy), both functors of kernels/functors.hpp.
template <class T, Device D, class Forward, class Backward>
Var<T, D> map_backward_from_input(const Var<T, D>& x, Forward forward, Backward backward, const char* op) {
  Tensor<T, D> y(x.shape());
  kernels::map(kernels::executor_for<D>{}, x.value().data(), y.data(), y.numel(), forward);
  return make_var<T, D>(std::move(y), {x}, op, [backward](Node<T, D>& self) {
    Tensor<T, D> gx(self.grad.shape());
    kernels::map2(kernels::executor_for<D>{}, self.inputs[0]->value.data(), self.grad.data(), gx.data(), gx.numel(),
                  backward);
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// y = apply(x) and gx = apply(gy), apply(in, out, n) writing n elements on device D.
template <class T, Device D, class Apply>
Var<T, D> diagonal_map(const Var<T, D>& x, Apply apply, const char* op) {
  Tensor<T, D> y(x.shape());
  apply(x.value().data(), y.data(), y.numel());
  return make_var<T, D>(std::move(y), {x}, op, [apply](Node<T, D>& self) {
    Tensor<T, D> gx(self.grad.shape());
    apply(self.grad.data(), gx.data(), gx.numel());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain::detail
