#pragma once
// relu and sigmoid on a device other than Cpu (HostEmulated, Cuda), through executor_for<D>;
// backward reads the output, as the CPU ops do.
#include "ptrain/autograd/detail/device_elementwise.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"

namespace ptrain {

template <class T, kernels::ExecutorDevice D>
Var<T, D> relu(const Var<T, D>& x) {
  return detail::device_map_backward_from_output(x, kernels::Relu{}, kernels::ReluBackward{}, "relu");
}

template <class T, kernels::ExecutorDevice D>
Var<T, D> sigmoid(const Var<T, D>& x) {
  return detail::device_map_backward_from_output(x, kernels::Sigmoid{}, kernels::SigmoidBackward{}, "sigmoid");
}

}  // namespace ptrain
