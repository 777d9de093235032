#pragma once
// dropout on a device other than Cpu (HostEmulated, Cuda), through executor_for<D>. The mask is
// not drawn on the host nor copied: the CPU op draws one seed from the Rng and hashes (seed, index)
// into each keep/drop decision (kernels::DropoutMask), so the device draws the same seed from the
// same Rng and its kernel recomputes the CPU's mask exactly, in forward and again in backward.
#include <utility>

#include "ptrain/autograd/ops/dropout.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"

namespace ptrain {

template <class T, kernels::ExecutorDevice D>
Var<T, D> dropout(const Var<T, D>& x, double p, bool training, Rng& rng = global_rng()) {
  detail::check_dropout_probability(p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return detail::dropout_everything(x);
  // The kernels hand the functor accumulate_t<T> values (float for half and bfloat16).
  using A = accumulate_t<T>;
  const auto apply = detail::dropout_apply<A, A>(p, rng);
  Tensor<T, D> y(x.shape());
  kernels::indexed::map_indexed(kernels::executor_for<D>{}, x.value().data(), y.data(), y.numel(), apply);
  return make_var<T, D>(std::move(y), {x}, "dropout", [apply](Node<T, D>& self) {
    Tensor<T, D> gx(self.grad.shape());
    kernels::indexed::map_indexed(kernels::executor_for<D>{}, self.grad.data(), gx.data(), gx.numel(), apply);
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
