#pragma once
// The Trainer's optimizer with its type erased: step, the learning rate (read and set), its state
// remembered and put back, and clipping the gradients it steps to a global norm
// (train/clip_grad_norm.hpp) over the ranks the policies say.
#include <functional>
#include <memory>
#include <span>

#include "ptrain/core/error.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/train/clip_grad_norm.hpp"

namespace ptrain::detail {

struct OptimizerHandle {
  std::function<void()> step;
  std::function<double()> lr;
  std::function<void(double)> set_lr;
  // Clips to max_norm, returns the norm before; empty for an optimizer without params().
  std::function<double(double max_norm)> clip;
  // The state as it is now, put back by calling what it returns; empty for an optimizer without
  // state()/load_state().
  std::function<std::function<void()>()> remember;

  template <class Opt, class Set>
  static OptimizerHandle of(const std::shared_ptr<Opt>& optimizer, Set& policies) {
    static_assert(Optimizer<Opt>, "Trainer: the optimizer must satisfy ptrain::Optimizer (step, zero_grad, lr, set_lr)");
    OptimizerHandle h;
    h.step = [optimizer] { optimizer->step(); };
    h.lr = [optimizer] { return optimizer->lr(); };
    h.set_lr = [optimizer](double lr) { optimizer->set_lr(lr); };
    if constexpr (requires { optimizer->load_state(optimizer->state()); }) {
      h.remember = [optimizer] {
        auto state = optimizer->state();
        for (auto& [name, tensor] : state.tensors) tensor = tensor.clone();  // state() may hand out live buffers
        return std::function<void()>([optimizer, state = std::move(state)] { optimizer->load_state(state); });
      };
    }
    if constexpr (requires { optimizer->params(); }) {
      h.clip = [optimizer, &policies](double max_norm) {
        const auto& params = optimizer->params();
        return ptrain::clip_grad_norm(params, max_norm,
                                      [&policies](std::span<double> sums) { policies.sum_over_model_parts(sums); },
                                      policies.gradient_norm_parameters(params));
      };
    }
    return h;
  }
};

}  // namespace ptrain::detail
