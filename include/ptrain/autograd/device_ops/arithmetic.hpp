#pragma once
// add (the residual connection) and scale on a device other than Cpu (HostEmulated, Cuda): the CPU
// ops' checks and backward, the elementwise work by kernels::indexed::map/map2 through executor_for<D>.
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ptrain/autograd/detail/device_elementwise.hpp"
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

// factor * x.
template <class T, kernels::ExecutorDevice D>
Var<T, D> scale(const Var<T, D>& x, std::type_identity_t<T> factor) {
  const kernels::Scale by{static_cast<double>(factor)};
  return detail::device_diagonal_map(
      x,
      [by](const T* in, T* out, std::int64_t n) {
        kernels::indexed::map(kernels::executor_for<D>{}, in, out, n, by);
      },
      "scale");
}

template <class T, kernels::ExecutorDevice D>
Var<T, D> operator*(const Var<T, D>& x, std::type_identity_t<T> factor) {
  return scale(x, factor);
}
template <class T, kernels::ExecutorDevice D>
Var<T, D> operator*(std::type_identity_t<T> factor, const Var<T, D>& x) {
  return scale(x, factor);
}

}  // namespace ptrain
