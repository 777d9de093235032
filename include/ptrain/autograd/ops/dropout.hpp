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

// One draw from rng seeds the whole mask (see kernels::DropoutMask), so a run is reproducible
// from the generator's seed whatever the thread count. p = 1 zeroes everything.
template <class T>
Var<T> dropout(const Var<T>& x, double p, bool training, Rng& rng = global_rng()) {
  check(p >= 0.0 && p <= 1.0, "dropout: probability ", p, " is outside [0, 1]");
  if (!training || p == 0.0) return x;
  if (p == 1.0) {
    return make_var<T>(Tensor<T>::zeros(x.shape()), {x}, "dropout", [](Node<T>& self) {
      self.inputs[0]->accumulate(Tensor<T>::zeros(self.grad.shape()));
    });
  }
  const kernels::DropoutMask mask{rng.engine()(), static_cast<std::uint64_t>(std::ldexp(p, 32))};
  const kernels::DropoutApply<T, accumulate_t<T>> apply{mask, static_cast<accumulate_t<T>>(1.0 / (1.0 - p))};
  Tensor<T> y(x.shape());
  kernels::map_indexed(x.value().data(), y.data(), y.numel(), apply);
  return make_var<T>(std::move(y), {x}, "dropout", [apply](Node<T>& self) {
    Tensor<T> gx(self.grad.shape());
    kernels::map_indexed(self.grad.data(), gx.data(), gx.numel(), apply);
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
