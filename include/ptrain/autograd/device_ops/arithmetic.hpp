#pragma once
// add (the residual connection) on a device other than Cpu (HostEmulated, Cuda): the CPU op's
// check and backward, the sum by kernels::indexed::map2 through executor_for<D>.
#include <utility>

#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"

namespace ptrain {

// a + b for tensors of the same shape (no broadcasting).
template <class T, kernels::ExecutorDevice D>
Var<T, D> add(const Var<T, D>& a, const Var<T, D>& b) {
  detail::check_add_shapes(a.shape(), b.shape());
  Tensor<T, D> y(a.shape());
  kernels::indexed::map2(kernels::executor_for<D>{}, a.value().data(), b.value().data(), y.data(), y.numel(),
                         kernels::Add{});
  return make_var<T, D>(std::move(y), {a, b}, "add", detail::add_backward<T, D>);
}

template <class T, kernels::ExecutorDevice D>
Var<T, D> operator+(const Var<T, D>& a, const Var<T, D>& b) {
  return add(a, b);
}

}  // namespace ptrain
