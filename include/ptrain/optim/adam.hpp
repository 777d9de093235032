#pragma once
// Adam and AdamW, step for step as torch.optim.Adam / torch.optim.AdamW (PyTorch 1.13):
//   t += 1
//   Adam:  g = g + weight_decay * p         AdamW: p = p * (1 - lr * weight_decay)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   v_max = max(v_max, v)                   (amsgrad; the denominator then uses v_max)
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// t counts the steps each parameter has taken (a skipped parameter does not advance).
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/optim/detail/params.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/tensor/tensor.hpp"

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

// The hyperparameters a schedule changes, checked where they are used (Adam, AdamW and their
// device twins in optim/device_adam.hpp).
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
// Any finite value is taken (a schedule stepped once past its end may leave the valid range, as
// in PyTorch); step() refuses to use an invalid one.
template <class Options>
void set_adam_lr(const char* name, Options& options, double lr) {
  check_hyper(std::isfinite(lr), name, "learning rate", lr, "a finite value");
  options.lr = lr;
}
template <class Options>
void set_adam_beta1(const char* name, Options& options, double beta1) {
  check_hyper(std::isfinite(beta1), name, "beta1", beta1, "a finite value");
  options.beta1 = beta1;
}

// The shared body; Decoupled selects AdamW's weight decay.
template <class T, bool Decoupled>
class AdamImpl {
 public:
  using value_type = T;
  using Options = std::conditional_t<Decoupled, AdamWOptions, AdamOptions>;
  static constexpr const char* name = Decoupled ? "AdamW" : "Adam";

  AdamImpl(std::vector<Var<T>> params, Options options) : params_(std::move(params)), options_(options) {
    check_adam_options(name, options_);
    check_params(name, params_);
    state_.resize(params_.size());
  }

  void step() {
    check_adam_step_options(name, options_);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor<T>* grad = step_grad(name, params_, i);
      if (grad) update(i, *grad);
    }
  }

  void zero_grad(bool set_to_none = true) { zero_grads(params_, set_to_none); }

  double lr() const { return options_.lr; }
  void set_lr(double lr) { set_adam_lr(name, options_, lr); }
  // beta1, the knob OneCycleLR cycles.
  double momentum() const { return options_.beta1; }
  void set_momentum(double beta1) { set_adam_beta1(name, options_, beta1); }
  const Options& options() const { return options_; }
  const std::vector<Var<T>>& params() const { return params_; }

  OptimizerState<T> state() const {
    OptimizerState<T> s;
    s.scalars = {{"lr", options_.lr}, {"beta1", options_.beta1}};
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& st = state_[i];
      if (st.step == 0) continue;
      const std::string prefix = std::to_string(i) + ".";
      // A float tensor, as PyTorch keeps state['step'] (exact up to 2^24 steps in float).
      s.tensors.emplace_back(prefix + "step", Tensor<T>::full({1}, static_cast<T>(st.step)));
      s.tensors.emplace_back(prefix + "exp_avg", st.exp_avg);
      s.tensors.emplace_back(prefix + "exp_avg_sq", st.exp_avg_sq);
      if (options_.amsgrad) s.tensors.emplace_back(prefix + "max_exp_avg_sq", st.max_exp_avg_sq);
    }
    return s;
  }
  // Replaces lr, beta1 and all per-parameter state with the saved ones (copied). A parameter's
  // state is all or nothing; nothing changes when an entry is invalid.
  void load_state(const OptimizerState<T>& s) {
    std::vector<ParamState> loaded(params_.size());
    std::vector<int> seen(params_.size(), 0);
    for (const auto& [key, t] : s.tensors) {
      const auto [index, field] =
          parse_state_key(name, key, params_.size(), {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
      auto& st = loaded[index];
      const Shape& shape = params_[index].shape();
      if (field == "step") {
        const Tensor<T> step = loaded_tensor(name, key, t, Shape{1});
        const double value = static_cast<double>(step[0]);
        check(value >= 1 && value == std::floor(value), name, ": state entry '", key, "' holds ", value,
              ", expected a step count >= 1");
        st.step = static_cast<std::int64_t>(value);
        seen[index] |= 1;
      } else if (field == "exp_avg") {
        st.exp_avg = loaded_tensor(name, key, t, shape);
        seen[index] |= 2;
      } else if (field == "exp_avg_sq") {
        st.exp_avg_sq = loaded_tensor(name, key, t, shape);
        seen[index] |= 4;
      } else {
        st.max_exp_avg_sq = loaded_tensor(name, key, t, shape);
        seen[index] |= 8;
      }
    }
    const int complete = options_.amsgrad ? 15 : 7;
    for (std::size_t i = 0; i < params_.size(); ++i)
      check(seen[i] == 0 || seen[i] == complete, name, ": saved state of parameter ", i,
            " is incomplete or has extra entries; expected exactly step, exp_avg, exp_avg_sq",
            options_.amsgrad ? " and max_exp_avg_sq" : "", " (amsgrad is ", options_.amsgrad ? "on" : "off", ")");
    Options options = options_;
    for (const auto& [key, value] : s.scalars) {
      if (key == "lr")
        options.lr = value;
      else if (key == "beta1")
        options.beta1 = value;
      else
        fail(name, ": state scalar '", key, "' is unknown, expected lr or beta1");
    }
    check_hyper(std::isfinite(options.lr), name, "saved learning rate", options.lr, "a finite value");
    check_hyper(std::isfinite(options.beta1), name, "saved beta1", options.beta1, "a finite value");
    options_ = options;
    state_ = std::move(loaded);
  }

 private:
  struct ParamState {
    std::int64_t step = 0;  // 0: not created yet
    Tensor<T> exp_avg, exp_avg_sq, max_exp_avg_sq;
  };

  void update(std::size_t i, const Tensor<T>& grad) {
    auto& st = state_[i];
    if (st.step == 0) {
      const Shape& shape = params_[i].shape();
      st.exp_avg = Tensor<T>::zeros(shape);
      st.exp_avg_sq = Tensor<T>::zeros(shape);
      if (options_.amsgrad) st.max_exp_avg_sq = Tensor<T>::zeros(shape);
    }
    ++st.step;
    const double t = static_cast<double>(st.step);
    const T beta1 = static_cast<T>(options_.beta1), beta2 = static_cast<T>(options_.beta2);
    const T keep1 = static_cast<T>(1 - options_.beta1), keep2 = static_cast<T>(1 - options_.beta2);
    const T step_size = static_cast<T>(options_.lr / (1 - std::pow(options_.beta1, t)));
    const T correction2 = static_cast<T>(std::sqrt(1 - std::pow(options_.beta2, t)));
    const T eps = static_cast<T>(options_.eps);
    const T decay = static_cast<T>(options_.weight_decay);
    const T shrink = static_cast<T>(1 - options_.lr * options_.weight_decay);
    const bool amsgrad = options_.amsgrad;

    auto p = params_[i].value().array();
    auto g = grad.array();
    auto m = st.exp_avg.array();
    auto v = st.exp_avg_sq.array();
    auto vmax = amsgrad ? st.max_exp_avg_sq.array() : v;
    // d is an expression of the old p: the moments read it before p is written.
    auto body = [&](auto ps, const auto& d, auto ms, auto vs, auto vmaxs) {
      ms = beta1 * ms + keep1 * d;
      vs = beta2 * vs + keep2 * d.square();
      if (amsgrad) {
        vmaxs = vmaxs.max(vs);
        if constexpr (Decoupled)
          ps = ps * shrink - step_size * (ms / (vmaxs.sqrt() / correction2 + eps));
        else
          ps -= step_size * (ms / (vmaxs.sqrt() / correction2 + eps));
      } else {
        if constexpr (Decoupled)
          ps = ps * shrink - step_size * (ms / (vs.sqrt() / correction2 + eps));
        else
          ps -= step_size * (ms / (vs.sqrt() / correction2 + eps));
      }
    };
    for_each_chunk(p.size(), [&](std::int64_t b, std::int64_t n) {
      auto ps = p.segment(b, n);
      if (!Decoupled && decay != 0)
        body(ps, g.segment(b, n) + decay * ps, m.segment(b, n), v.segment(b, n), vmax.segment(b, n));
      else
        body(ps, g.segment(b, n), m.segment(b, n), v.segment(b, n), vmax.segment(b, n));
    });
  }

  std::vector<Var<T>> params_;
  Options options_;
  std::vector<ParamState> state_;
};

}  // namespace detail

template <class T>
class Adam : public detail::AdamImpl<T, false> {
 public:
  Adam(std::vector<Var<T>> params, AdamOptions options = {})
      : detail::AdamImpl<T, false>(std::move(params), options) {}
};

template <class T>
class AdamW : public detail::AdamImpl<T, true> {
 public:
  AdamW(std::vector<Var<T>> params, AdamWOptions options = {})
      : detail::AdamImpl<T, true>(std::move(params), options) {}
};

}  // namespace ptrain
