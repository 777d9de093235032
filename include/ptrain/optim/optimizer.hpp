#pragma once
// What every optimizer offers (the Optimizer concept), the knob OneCycleLR cycles
// (MomentumOptimizer), parameter groups, and the state an optimizer hands to a checkpoint writer.
//
// Parameter groups (PyTorch's param_groups): an optimizer made from a list of ParamGroup steps
// each group with its own learning rate and weight decay (the options' values where a group
// leaves them unset); made from a plain parameter list it has one group. The group API:
//   Sgd<float> sgd({{trunk, 0.001}, {head, 0.01}}, {.lr = 0.01, .momentum = 0.9});
//   group_count(), group_lr(g), set_group_lr(g, lr), group_weight_decay(g)
//   params()  every group's parameters, group after group: parameter i of the optimizer (the index
//             state keys and Sharded use) is the i-th of that list, as PyTorch numbers them
//   lr()      group 0's rate
//   set_lr(x) what a schedule calls: group 0's rate becomes x and every group's its initial rate
//             (the one it was made with) times x / group 0's initial rate, as LambdaLR and StepLR
//             scale each group's initial_lr by the same factor
// state() saves every group's rate ("lr" for group 0, "group.<g>.lr" for the others) and the
// group count ("groups"); load_state() refuses a state saved with another count. An optimizer gets
// this API by deriving from detail::GroupedOptimizer (detail/param_groups.hpp) and stepping each
// of its groups_ with the group's lr and weight_decay (Sgd and Adam show how).
#include <concepts>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/device/cpu.hpp"
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

// Parameters stepped with their own learning rate and weight decay; unset: the optimizer's options'.
template <class T, class D = Cpu>
struct ParamGroup {
  std::vector<Var<T, D>> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

// Of an optimizer's parameter (a mixed-precision master), the model's 16-bit parameter that its
// step also writes, rounded, in the same pass over memory; empty: none. Sgd, Adam and AdamW take a
// list of them, one per parameter (round_into); the Trainer hands over MixedPrecision's
// (hand_rounding_to_optimizer), which then leaves those parameters' rounding to the optimizer.
template <class D = Cpu>
using RoundedParameter = std::variant<std::monostate, Var<half, D>, Var<bfloat16, D>>;

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
