#pragma once
// What every optimizer offers (the Optimizer concept), the knob OneCycleLR cycles
// (MomentumOptimizer), and the state an optimizer hands to a checkpoint writer.
#include <concepts>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

// Updates its parameters in place from their gradients. lr is read and written by schedules.
template <class O>
concept Optimizer = requires(O& o, const O& c, double lr) {
  o.step();
  o.zero_grad();
  { c.lr() } -> std::convertible_to<double>;
  o.set_lr(lr);
};

// An optimizer whose momentum a schedule may cycle: SGD's momentum, Adam's beta1 (as in
// PyTorch's OneCycleLR, which writes group['momentum'] or group['betas'][0]).
template <class O>
concept MomentumOptimizer = Optimizer<O> && requires(O& o, const O& c, double m) {
  { c.momentum() } -> std::convertible_to<double>;
  o.set_momentum(m);
};

// What a checkpoint needs to resume an optimizer. scalars hold the hyperparameters that change
// during training ("lr", "momentum"); tensors hold the per-parameter state, named
// "<parameter index>.<name>" like PyTorch's state_dict()['state'][index][name], e.g.
// "3.exp_avg". The tensors returned by state() are the live buffers, not copies.
template <class T>
struct OptimizerState {
  using value_type = T;
  std::vector<std::pair<std::string, double>> scalars;
  std::vector<std::pair<std::string, Tensor<T>>> tensors;
};

}  // namespace ptrain
