#pragma once
// Dropout as torch.nn.functional.dropout, on any device: in training each element is zeroed with
// probability p and the survivors are scaled by 1 / (1 - p), so the expected value is unchanged; in
// evaluation (or with p = 0) the input passes through untouched. The mask is not stored: one draw
// from the Rng seeds a counter-based hash of (seed, index) (kernels::DropoutMask), so backward, any
// thread count and any device recompute the same mask.
#include <cmath>
#include <cstdint>

#include "ptrain/autograd/detail/elementwise.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

namespace detail {
inline void check_dropout_probability(double p) {
  check(p >= 0.0 && p <= 1.0, "dropout: probability ", p, " is outside [0, 1]");
}

// dropout with p = 1: zeros, and zero gradients.
template <class T, Device D>
Var<T, D> dropout_everything(const Var<T, D>& x) {
  return make_var<T, D>(Tensor<T, D>::zeros(x.shape()), {x}, "dropout",
                        [](Node<T, D>& self) { self.inputs[0]->accumulate(Tensor<T, D>::zeros(self.grad.shape())); });
}
}  // namespace detail

// One draw from rng seeds the whole mask, so a run is reproducible from the generator's seed
// whatever the thread count and the device. p = 1 zeroes everything.
template <class T, Device D>
Var<T, D> dropout(const Var<T, D>& x, double p, bool training, Rng& rng = global_rng()) {
  detail::check_dropout_probability(p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return detail::dropout_everything(x);
  const kernels::DropoutMask mask{rng.engine()(), static_cast<std::uint64_t>(std::ldexp(p, 32))};
  const double keep_scale = 1.0 / (1.0 - p);
  return detail::diagonal_map(
      x,
      [mask, keep_scale](const T* in, T* out, std::int64_t n) {
        kernels::dropout(kernels::executor_for<D>{}, in, out, n, mask, keep_scale);
      },
      "dropout");
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::dropout)
