#pragma once
// dropout on a device other than Cpu (HostEmulated, Cuda), through executor_for<D>. The mask is
// not drawn on the host nor copied: the CPU op draws one seed from the Rng and hashes (seed, index)
// into each keep/drop decision (kernels::DropoutMask), so the device draws the same seed from the
// same Rng and its kernel recomputes the CPU's mask exactly, in forward and again in backward.
#include <cstdint>

#include "ptrain/autograd/detail/device_elementwise.hpp"
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
  return detail::device_diagonal_map(
      x,
      [apply](const T* in, T* out, std::int64_t n) {
        kernels::indexed::map_indexed(kernels::executor_for<D>{}, in, out, n, apply);
      },
      "dropout");
}

}  // namespace ptrain
