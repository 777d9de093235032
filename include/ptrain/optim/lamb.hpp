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

  // Adam's layout: the groups' rates, beta1 and per parameter "<i>.step", "<i>.exp_avg",
  // "<i>.exp_avg_sq" (host copies from another device).
  OptimizerState<T> state() const {
    OptimizerState<T> s;
    groups_.save(s.scalars);
    s.scalars.emplace_back("beta1", options_.beta1);
    for (std::size_t i = 0; i < state_.size(); ++i) {
      const auto& st = state_[i];
      if (st.step == 0) continue;
      const std::string prefix = std::to_string(i) + ".";
      s.tensors.emplace_back(prefix + "step", Tensor<T>::full({1}, static_cast<T>(st.step)));
      s.tensors.emplace_back(prefix + "exp_avg", on_host(st.exp_avg));
      s.tensors.emplace_back(prefix + "exp_avg_sq", on_host(st.exp_avg_sq));
    }
    return s;
  }
  // Replaces the groups' rates, beta1 and all per-parameter state with the saved ones (copied). A
  // parameter's state is all or nothing; nothing changes when an entry is invalid.
  void load_state(const OptimizerState<T>& s) {
    const auto& params = groups_.params();
    std::vector<ParamState> loaded(params.size());
    std::vector<int> seen(params.size(), 0);
    for (const auto& [key, t] : s.tensors) {
      const auto [index, field] = detail::parse_state_key(name, key, params.size(), {"step", "exp_avg", "exp_avg_sq"});
      auto& st = loaded[index];
      if (field == "step") {
        const double value = static_cast<double>(detail::loaded_tensor(name, key, t, Shape{1})[0]);
        check(value >= 1 && value == std::floor(value), name, ": state entry '", key, "' holds ", value,
              ", expected a step count >= 1");
        st.step = static_cast<std::int64_t>(value);
        seen[index] |= 1;
      } else {
        const bool first = field == "exp_avg";
        const Tensor<T> loaded = detail::loaded_tensor(name, key, t, params[index].shape());
        (first ? st.exp_avg : st.exp_avg_sq) = on_device<D>(loaded);
        seen[index] |= first ? 2 : 4;
      }
    }
    for (std::size_t i = 0; i < params.size(); ++i)
      check(seen[i] == 0 || seen[i] == 7, name, ": saved state of parameter ", i,
            " is incomplete; expected exactly step, exp_avg and exp_avg_sq");
    typename detail::ParamGroups<T, D>::Loading rates(groups_);
    LambOptions options = options_;
    for (const auto& [key, value] : s.scalars) {
      if (key == "beta1")
        options.beta1 = value;
      else if (!rates.take(name, key, value))
        fail(name, ": state scalar '", key, "' is unknown, expected lr, beta1, groups or group.<g>.lr");
    }
    check_hyper_finite(options.beta1, "saved beta1");
    rates.apply(name, groups_);
    options_ = options;
    state_ = std::move(loaded);
  }

 private:
  struct ParamState {
    std::int64_t step = 0;  // 0: not created yet
    Tensor<T, D> exp_avg, exp_avg_sq;
  };

  static std::vector<Var<T, D>> values(const std::vector<std::pair<std::string, Var<T, D>>>& named) {
    std::vector<Var<T, D>> out;
    for (const auto& [n, p] : named) out.push_back(p);
    return out;
  }
  static void check_hyper_finite(double value, const char* what) {
    detail::check_hyper(std::isfinite(value), name, what, value, "a finite value");
  }

  std::vector<bool> decays_;
  LambOptions options_;
  std::vector<ParamState> state_;
};

}  // namespace ptrain
