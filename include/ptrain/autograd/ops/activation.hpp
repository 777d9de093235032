#pragma once
// relu (and later sigmoid, softmax, log_softmax).
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/functors.hpp"

namespace ptrain {

template <class T>
Var<T> relu(const Var<T>& x) {
  Tensor<T> y = kernels::map(x.value(), kernels::Relu{});
  return make_var<T>(y, {x}, "relu", [y](Node<T>& self) {
    self.inputs[0]->accumulate(kernels::map2(y, self.grad, kernels::ReluBackward{}));
  });
}

}  // namespace ptrain
