#pragma once
// scale_gradient(x, factor): x unchanged going forward (a view of its value); going back, the
// gradient times factor. It puts the loss scale of mixed precision (and the share of a micro-batch)
// on the gradient that reaches a loss's input, where it is small, instead of on the loss itself: a
// scaled loss, or a seed of 65536, does not fit fp16 (cross_entropy's grad_scale does the same
// inside its kernel).
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"

namespace ptrain {

template <class T, class D>
Var<T, D> scale_gradient(const Var<T, D>& x, double factor) {
  return make_var<T, D>(x.value(), {x}, "scale_gradient", [factor](Node<T, D>& self) {
    Tensor<T, D> gx(self.grad.shape());
    kernels::indexed::map(kernels::executor_for<D>{}, self.grad.data(), gx.data(), gx.numel(),
                          kernels::Scale{factor});
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
