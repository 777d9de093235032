#pragma once
// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), the optimizer ALBERT and
// BERT pre-train with, as NVIDIA's FusedLAMB and the reference implementations compute it:
//   t += 1
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   update = m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * p
//   trust = ||p|| / ||update||   (per parameter tensor; 1 when either norm is 0)
//   p = p - lr * trust * update
// Weight decay skips the parameters decays_weight() exempts by name (LayerNorm and biases, as
// HuggingFace's and fairseq's no_decay lists do) when the optimizer is given names. t counts the
// steps each parameter has taken (a skipped parameter does not advance).
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/optim.hpp"
#include "ptrain/optim/adam.hpp"
#include "ptrain/optim/detail/param_groups.hpp"
#include "ptrain/optim/detail/params.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

struct LambOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0.01;  // decoupled: added to the update, scaled by the trust ratio with it
};

// Whether a parameter of this name takes weight decay: not LayerNorm's weights and biases
// ("LayerNorm" in HuggingFace's names, "layer_norm" in fairseq's) nor any bias.
inline bool decays_weight(std::string_view name) {
  const auto ends_with = [&](std::string_view tail) {
    return name.size() >= tail.size() && name.substr(name.size() - tail.size()) == tail;
  };
  return name.find("LayerNorm") == std::string_view::npos && name.find("layer_norm") == std::string_view::npos &&
         !ends_with(".bias") && name != "bias";
}

// Parameters on any device D: the update runs through kernels/optim.hpp's lamb_step and the
// moments live in D's memory. lr and weight_decay are per parameter group (optimizer.hpp); a
// parameter decays_weight() exempts by name takes no weight decay in any group.
template <class T, Device D = Cpu>
class Lamb : public detail::GroupedOptimizer<T, D> {
  using detail::GroupedOptimizer<T, D>::groups_;

 public:
  using value_type = T;
  using device_type = D;
  using Options = LambOptions;
  static constexpr const char* name = "Lamb";

  // Every parameter takes weight decay.
  Lamb(std::vector<ParamGroup<T, D>> groups, LambOptions options = {})
      : detail::GroupedOptimizer<T, D>(name, std::move(groups), (detail::check_adam_options(name, options), options.lr),
                                       options.weight_decay),
        decays_(groups_.params().size(), true),
        options_(options) {
    state_.resize(groups_.params().size());
  }
  Lamb(std::vector<Var<T, D>> params, LambOptions options = {}) : Lamb(detail::one_group(std::move(params)), options) {}
  // Named parameters (a module's named_parameters()), one group: weight decay skips those
  // decays_weight() exempts.
  Lamb(const std::vector<std::pair<std::string, Var<T, D>>>& named, LambOptions options = {})
      : Lamb(values(named), options) {
    for (std::size_t i = 0; i < named.size(); ++i) decays_[i] = decays_weight(named[i].first);
  }

  void step() {
    const kernels::executor_for<D> ex;
    Tensor<double, D> norms(Shape{3});
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      LambOptions options = options_;
      options.lr = groups_[g].lr;
      options.weight_decay = groups_[g].weight_decay;
      detail::check_adam_step_options(name, options);
      for (std::size_t i = groups_[g].begin; i < groups_[g].end; ++i) {
        const Tensor<T, D>* grad = detail::step_grad(name, groups_.params(), i);
        if (!grad) continue;
        Tensor<T, D>& p = groups_.params()[i].value();
        auto& st = state_[i];
        if (st.step == 0) {
          st.exp_avg = Tensor<T, D>::zeros(p.shape());
          st.exp_avg_sq = Tensor<T, D>::zeros(p.shape());
        }
        ++st.step;
        Tensor<T, D> update(p.shape());
        kernels::lamb_step(ex, options, st.step, decays_[i] ? options.weight_decay : 0.0, p.data(), grad->data(),
                           kernels::LambBuffers<T>{st.exp_avg.data(), st.exp_avg_sq.data(), update.data(), norms.data()},
                           p.numel());
      }
    }
  }

  double momentum() const { return options_.beta1; }
  void set_momentum(double beta1) { detail::set_adam_beta1(name, options_, beta1); }
  // The options it was made with, beta1 as it is now (the rates are the groups').
  const LambOptions& options() const { return options_; }
  // Whether parameter i takes weight decay.
  bool decays(std::size_t i) const { return decays_.at(i); }

  // Adam's layout (detail::save_adam_state): the groups' rates, beta1 and per parameter
  // "<i>.step", "<i>.exp_avg", "<i>.exp_avg_sq".
  OptimizerState<T> state() const { return detail::save_adam_state(groups_, options_.beta1, state_, false); }
  // Replaces the groups' rates, beta1 and all per-parameter state with the saved ones (copied).
  void load_state(const OptimizerState<T>& s) {
    detail::load_adam_state(name, s, groups_, options_.beta1, state_, false, false);
  }

 private:
  static std::vector<Var<T, D>> values(const std::vector<std::pair<std::string, Var<T, D>>>& named) {
    std::vector<Var<T, D>> out;
    for (const auto& [n, p] : named) out.push_back(p);
    return out;
  }

  std::vector<bool> decays_;
  LambOptions options_;
  std::vector<detail::AdamMoments<T, D>> state_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::Lamb)
