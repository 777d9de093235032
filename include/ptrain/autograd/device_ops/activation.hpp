#pragma once
// relu and sigmoid on a device other than Cpu (HostEmulated, Cuda), through executor_for<D>;
// backward reads the output, as the CPU ops do.
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"

namespace ptrain {

template <class T, kernels::ExecutorDevice D>
Var<T, D> relu(const Var<T, D>& x) {
  Tensor<T, D> y(x.shape());
  kernels::indexed::map(kernels::executor_for<D>{}, x.value().data(), y.data(), y.numel(), kernels::Relu{});
  return make_var<T, D>(y, {x}, "relu", [y](Node<T, D>& self) {
    Tensor<T, D> gx(y.shape());
    kernels::indexed::map2(kernels::executor_for<D>{}, y.data(), self.grad.data(), gx.data(), gx.numel(),
                           kernels::ReluBackward{});
    self.inputs[0]->accumulate(std::move(gx));
  });
}

template <class T, kernels::ExecutorDevice D>
Var<T, D> sigmoid(const Var<T, D>& x) {
  Tensor<T, D> y(x.shape());
  kernels::indexed::map(kernels::executor_for<D>{}, x.value().data(), y.data(), y.numel(), kernels::Sigmoid{});
  return make_var<T, D>(y, {x}, "sigmoid", [y](Node<T, D>& self) {
    Tensor<T, D> gx(y.shape());
    kernels::indexed::map2(kernels::executor_for<D>{}, y.data(), self.grad.data(), gx.data(), gx.numel(),
                           kernels::SigmoidBackward{});
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
