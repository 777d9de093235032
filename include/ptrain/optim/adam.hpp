#pragma once
// Adam and AdamW, step for step as torch.optim.Adam / torch.optim.AdamW (PyTorch 1.13):
//   t += 1
//   Adam:  g = g + weight_decay * p         AdamW: p = p * (1 - lr * weight_decay)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   v_max = max(v_max, v)                   (amsgrad; the denominator then uses v_max)
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// t counts the steps each parameter has taken (a skipped parameter does not advance). lr and
// weight_decay are per parameter group (optimizer.hpp), the betas are the optimizer's.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/optim.hpp"
#include "ptrain/optim/detail/param_groups.hpp"
#include "ptrain/optim/detail/params.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/tensor/tensor.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
  bool amsgrad = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: shrinks the parameter directly
  bool amsgrad = false;
};

namespace detail {

// The hyperparameters a schedule changes, checked where they are used.
template <class Options>
void check_adam_step_options(const char* name, const Options& options) {
  check_hyper(options.lr >= 0 && std::isfinite(options.lr), name, "learning rate", options.lr, "a finite value >= 0");
  check_hyper(options.beta1 >= 0 && options.beta1 < 1, name, "beta1", options.beta1, "in [0, 1)");
}
// All of them, checked when an optimizer is made.
template <class Options>
void check_adam_options(const char* name, const Options& options) {
  check_adam_step_options(name, options);
  check_hyper(options.eps >= 0 && std::isfinite(options.eps), name, "epsilon", options.eps, "a finite value >= 0");
  check_hyper(options.beta2 >= 0 && options.beta2 < 1, name, "beta2", options.beta2, "in [0, 1)");
  check_hyper(options.weight_decay >= 0 && std::isfinite(options.weight_decay), name, "weight_decay",
              options.weight_decay, "a finite value >= 0");
}
// Any finite value is taken (as in PyTorch); step() refuses to use an invalid one.
template <class Options>
void set_adam_beta1(const char* name, Options& options, double beta1) {
  check_hyper(std::isfinite(beta1), name, "beta1", beta1, "a finite value");
  options.beta1 = beta1;
}

// Adam's per-parameter state, which Lamb keeps too: the steps it has taken (counted on the host, as
// the bias corrections need it; 0: not created yet) and the moments.
template <class T, class D>
struct AdamMoments {
  std::int64_t step = 0;
  Tensor<T, D> exp_avg, exp_avg_sq, max_exp_avg_sq;  // max_exp_avg_sq: amsgrad only
};

// The optimizer's saved state: the groups' rates, beta1 and per parameter "<i>.step",
// "<i>.exp_avg", "<i>.exp_avg_sq" (and "<i>.max_exp_avg_sq" under amsgrad), host copies from another
// device.
template <class T, class D>
OptimizerState<T> save_adam_state(const ParamGroups<T, D>& groups, double beta1,
                                  const std::vector<AdamMoments<T, D>>& moments, bool amsgrad) {
  OptimizerState<T> s;
  groups.save(s.scalars);
  s.scalars.emplace_back("beta1", beta1);
  for (std::size_t i = 0; i < moments.size(); ++i) {
    const auto& st = moments[i];
    if (st.step == 0) continue;
    const std::string prefix = std::to_string(i) + ".";
    // A float tensor, as PyTorch keeps state['step'] (exact up to 2^24 steps in float).
    s.tensors.emplace_back(prefix + "step", Tensor<T>::full({1}, static_cast<T>(st.step)));
    s.tensors.emplace_back(prefix + "exp_avg", on_host(st.exp_avg));
    s.tensors.emplace_back(prefix + "exp_avg_sq", on_host(st.exp_avg_sq));
    if (amsgrad) s.tensors.emplace_back(prefix + "max_exp_avg_sq", on_host(st.max_exp_avg_sq));
  }
  return s;
}

// Reads what save_adam_state wrote into the groups' rates, beta1 and the moments, all checked
// before any is replaced: nothing changes when an entry is invalid, and a parameter's state is all
// or nothing. has_amsgrad: the optimizer has the option (Adam's max_exp_avg_sq is then a name it
// knows, whether amsgrad is on or not; Lamb has no such name).
template <class T, class D>
void load_adam_state(const char* name, const OptimizerState<T>& s, ParamGroups<T, D>& groups, double& beta1,
                     std::vector<AdamMoments<T, D>>& moments, bool amsgrad, bool has_amsgrad = true) {
  const auto& params = groups.params();
  std::vector<AdamMoments<T, D>> loaded(params.size());
  std::vector<int> seen(params.size(), 0);
  for (const auto& [key, t] : s.tensors) {
    const auto [index, field] =
        has_amsgrad ? parse_state_key(name, key, params.size(), {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
                    : parse_state_key(name, key, params.size(), {"step", "exp_avg", "exp_avg_sq"});
    auto& st = loaded[index];
    const Shape& shape = params[index].shape();
    if (field == "step") {
      const Tensor<T> step = loaded_tensor(name, key, t, Shape{1});
      const double value = static_cast<double>(step[0]);
      check(value >= 1 && value == std::floor(value), name, ": state entry '", key, "' holds ", value,
            ", expected a step count >= 1");
      st.step = static_cast<std::int64_t>(value);
      seen[index] |= 1;
    } else if (field == "exp_avg") {
      st.exp_avg = on_device<D>(loaded_tensor(name, key, t, shape));
      seen[index] |= 2;
    } else if (field == "exp_avg_sq") {
      st.exp_avg_sq = on_device<D>(loaded_tensor(name, key, t, shape));
      seen[index] |= 4;
    } else {
      st.max_exp_avg_sq = on_device<D>(loaded_tensor(name, key, t, shape));
      seen[index] |= 8;
    }
  }
  const int complete = amsgrad ? 15 : 7;
  for (std::size_t i = 0; i < params.size(); ++i)
    check(seen[i] == 0 || seen[i] == complete, name, ": saved state of parameter ", i,
          " is incomplete or has extra entries; expected exactly step, exp_avg, exp_avg_sq",
          amsgrad ? " and max_exp_avg_sq" : "", has_amsgrad ? (amsgrad ? " (amsgrad is on)" : " (amsgrad is off)") : "");
  typename ParamGroups<T, D>::Loading rates(groups);
  double saved_beta1 = beta1;
  for (const auto& [key, value] : s.scalars) {
    if (key == "beta1")
      saved_beta1 = value;
    else if (!rates.take(name, key, value))
      fail(name, ": state scalar '", key, "' is unknown, expected lr, beta1, groups or group.<g>.lr");
  }
  check_hyper(std::isfinite(saved_beta1), name, "saved beta1", saved_beta1, "a finite value");
  rates.apply(name, groups);
  beta1 = saved_beta1;
  moments = std::move(loaded);
}

// The shared body; Decoupled selects AdamW's weight decay. Parameters on any device D: the update
// runs through kernels/optim.hpp's dispatch point (Eigen on the CPU, the indexed algorithm
// elsewhere) and the moments live in D's memory.
template <class T, Device D, bool Decoupled>
class AdamImpl : public GroupedOptimizer<T, D>, public RoundsAsItSteps<D> {
  using GroupedOptimizer<T, D>::groups_;

 public:
  using value_type = T;
  using device_type = D;
  using Options = std::conditional_t<Decoupled, AdamWOptions, AdamOptions>;
  static constexpr const char* name = Decoupled ? "AdamW" : "Adam";

  AdamImpl(std::vector<ParamGroup<T, D>> groups, Options options)
      : GroupedOptimizer<T, D>(name, std::move(groups), (check_adam_options(name, options), options.lr),
                               options.weight_decay),
        options_(options) {
    state_.resize(groups_.params().size());
  }

  void step() {
    const kernels::executor_for<D> ex;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      Options options = options_;
      options.lr = groups_[g].lr;
      options.weight_decay = groups_[g].weight_decay;
      check_adam_step_options(name, options);
      for (std::size_t i = groups_[g].begin; i < groups_[g].end; ++i) {
        const Tensor<T, D>* grad = step_grad(name, groups_.params(), i);
        if (!grad) continue;
        Tensor<T, D>& p = groups_.params()[i].value();
        auto& st = state_[i];
        if (st.step == 0) {
          st.exp_avg = Tensor<T, D>::zeros(p.shape());
          st.exp_avg_sq = Tensor<T, D>::zeros(p.shape());
          if (options.amsgrad) st.max_exp_avg_sq = Tensor<T, D>::zeros(p.shape());
        }
        ++st.step;
        const kernels::AdamBuffers<T> buffers{st.exp_avg.data(), st.exp_avg_sq.data(),
                                              options.amsgrad ? st.max_exp_avg_sq.data() : nullptr};
        const kernels::SixteenBitCopy rounded = this->rounded_copy(name, i, state_.size(), p.numel());
        if constexpr (Decoupled)
          kernels::adamw_step(ex, options, st.step, p.data(), grad->data(), buffers, p.numel(), rounded);
        else
          kernels::adam_step(ex, options, st.step, p.data(), grad->data(), buffers, p.numel(), rounded);
      }
    }
  }

  // beta1, the knob OneCycleLR cycles.
  double momentum() const { return options_.beta1; }
  void set_momentum(double beta1) { set_adam_beta1(name, options_, beta1); }
  // The options it was made with, beta1 as it is now (the rates are the groups').
  const Options& options() const { return options_; }

  // The per-parameter state on the host (save_adam_state): the live tensors on the CPU, copies
  // from another device.
  OptimizerState<T> state() const { return save_adam_state(groups_, options_.beta1, state_, options_.amsgrad); }
  // Replaces the groups' rates, beta1 and all per-parameter state with the saved ones (copied).
  void load_state(const OptimizerState<T>& s) {
    load_adam_state(name, s, groups_, options_.beta1, state_, options_.amsgrad);
  }

 private:
  Options options_;
  std::vector<AdamMoments<T, D>> state_;
};

}  // namespace detail

template <class T, Device D = Cpu>
class Adam : public detail::AdamImpl<T, D, false> {
 public:
  Adam(std::vector<Var<T, D>> params, AdamOptions options = {})
      : detail::AdamImpl<T, D, false>(detail::one_group(std::move(params)), options) {}
  Adam(std::vector<ParamGroup<T, D>> groups, AdamOptions options = {})
      : detail::AdamImpl<T, D, false>(std::move(groups), options) {}
};

template <class T, Device D = Cpu>
class AdamW : public detail::AdamImpl<T, D, true> {
 public:
  AdamW(std::vector<Var<T, D>> params, AdamWOptions options = {})
      : detail::AdamImpl<T, D, true>(detail::one_group(std::move(params)), options) {}
  AdamW(std::vector<ParamGroup<T, D>> groups, AdamWOptions options = {})
      : detail::AdamImpl<T, D, true>(std::move(groups), options) {}
};

}  // namespace ptrain

PTRAIN_PREBUILT_KERNEL(ptrain::kernels::cpu::adam_step<false, float, ptrain::AdamOptions>)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::cpu::adam_step<false, double, ptrain::AdamOptions>)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::cpu::adam_step<true, float, ptrain::AdamWOptions>)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::cpu::adam_step<true, double, ptrain::AdamWOptions>)
// Their shared body, a base class: its members are not instantiated with Adam's.
PTRAIN_PREBUILT_CLASS(ptrain::detail::AdamImpl<float, ptrain::Cpu, false>)
PTRAIN_PREBUILT_CLASS(ptrain::detail::AdamImpl<double, ptrain::Cpu, false>)
PTRAIN_PREBUILT_CLASS(ptrain::detail::AdamImpl<float, ptrain::Cpu, true>)
PTRAIN_PREBUILT_CLASS(ptrain::detail::AdamImpl<double, ptrain::Cpu, true>)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::Adam)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::AdamW)
