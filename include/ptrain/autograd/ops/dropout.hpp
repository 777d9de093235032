#pragma once
// Dropout as torch.nn.functional.dropout: in training each element is zeroed with probability
// p and the survivors are scaled by 1 / (1 - p), so the expected value is unchanged; in
// evaluation (or with p = 0) the input passes through untouched.
#include <cmath>
#include <cstdint>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/functors.hpp"

namespace ptrain {

namespace detail {
inline void check_dropout_probability(double p) {
  check(p >= 0.0 && p <= 1.0, "dropout: probability ", p, " is outside [0, 1]");
}

// dropout with p = 1 on any device: zeros, and zero gradients.
template <class T, class D>
Var<T, D> dropout_everything(const Var<T, D>& x) {
  return make_var<T, D>(Tensor<T, D>::zeros(x.shape()), {x}, "dropout", [](Node<T, D>& self) {
    self.inputs[0]->accumulate(Tensor<T, D>::zeros(self.grad.shape()));
  });
}

// The mask and scale of one training call with 0 < p < 1, computing in Value: one draw from rng
// seeds the whole mask (see kernels::DropoutMask), on every device.
template <class Value, class Scale>
kernels::DropoutApply<Value, Scale> dropout_apply(double p, Rng& rng) {
  return {kernels::DropoutMask{rng.engine()(), static_cast<std::uint64_t>(std::ldexp(p, 32))},
          static_cast<Scale>(1.0 / (1.0 - p))};
}
}  // namespace detail

// One draw from rng seeds the whole mask, so a run is reproducible from the generator's seed
// whatever the thread count. p = 1 zeroes everything.
template <class T>
Var<T> dropout(const Var<T>& x, double p, bool training, Rng& rng = global_rng()) {
  detail::check_dropout_probability(p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return detail::dropout_everything(x);
  const auto apply = detail::dropout_apply<T, accumulate_t<T>>(p, rng);
  Tensor<T> y(x.shape());
  kernels::map_indexed(x.value().data(), y.data(), y.numel(), apply);
  return make_var<T>(std::move(y), {x}, "dropout", [apply](Node<T>& self) {
    Tensor<T> gx(self.grad.shape());
    kernels::map_indexed(self.grad.data(), gx.data(), gx.numel(), apply);
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
