#pragma once
// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay,
// step for step as torch.optim.SGD (PyTorch 1.13):
//   d = g + weight_decay * p
//   b = d                                   on a parameter's first step with momentum
//   b = momentum * b + (1 - dampening) * d  afterwards
//   d = nesterov ? d + momentum * b : b     (when momentum != 0)
//   p = p - lr * d
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/optim/detail/params.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

struct SgdOptions {
  double lr = std::numeric_limits<double>::quiet_NaN();  // required, as in torch.optim.SGD
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

namespace detail {
// The hyperparameters a schedule changes, checked where they are used (each step).
inline void check_sgd_step_options(const char* name, const SgdOptions& options) {
  check_hyper(options.lr >= 0 && std::isfinite(options.lr), name, "learning rate", options.lr, "a finite value >= 0");
  check_hyper(options.momentum >= 0, name, "momentum", options.momentum, ">= 0");
}
// All of them, checked when an optimizer is made.
inline void check_sgd_options(const char* name, const SgdOptions& options) {
  check(!std::isnan(options.lr), name, ": lr was not set (SgdOptions::lr has no default, as in torch.optim.SGD)");
  check_sgd_step_options(name, options);
  check_hyper(std::isfinite(options.dampening), name, "dampening", options.dampening, "a finite value");
  check_hyper(options.weight_decay >= 0 && std::isfinite(options.weight_decay), name, "weight_decay",
              options.weight_decay, "a finite value >= 0");
  check(!options.nesterov || (options.momentum > 0 && options.dampening == 0), name,
        ": Nesterov momentum requires a momentum > 0 and zero dampening (got momentum ", options.momentum,
        ", dampening ", options.dampening, ")");
}
}  // namespace detail

template <class T>
class Sgd {
 public:
  using value_type = T;
  static constexpr const char* name = "SGD";

  Sgd(std::vector<Var<T>> params, SgdOptions options) : params_(std::move(params)), options_(options) {
    detail::check_sgd_options(name, options_);
    detail::check_params(name, params_);
    buffers_.resize(params_.size());
  }

  void step() {
    check_options();
    const T lr = static_cast<T>(options_.lr);
    const T momentum = static_cast<T>(options_.momentum);
    const T keep = static_cast<T>(1 - options_.dampening);
    const T decay = static_cast<T>(options_.weight_decay);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor<T>* grad = detail::step_grad(name, params_, i);
      if (!grad) continue;
      auto p = params_[i].value().array();
      auto g = grad->array();
      if (options_.momentum == 0) {
        detail::for_each_chunk(p.size(), [&](std::int64_t b, std::int64_t n) {
          auto ps = p.segment(b, n);
          if (decay != 0)
            ps -= lr * (g.segment(b, n) + decay * ps);
          else
            ps -= lr * g.segment(b, n);
        });
        continue;
      }
      const bool first = !buffers_[i].defined();
      if (first) buffers_[i] = Tensor<T>(params_[i].shape());
      auto buf = buffers_[i].array();
      const bool nesterov = options_.nesterov;
      // d is an expression of the old p: every statement reads it before p is written.
      auto update = [&](auto ps, const auto& d, auto bs) {
        if (first)
          bs = d;
        else
          bs = momentum * bs + keep * d;
        if (nesterov)
          ps -= lr * (d + momentum * bs);
        else
          ps -= lr * bs;
      };
      detail::for_each_chunk(p.size(), [&](std::int64_t b, std::int64_t n) {
        auto ps = p.segment(b, n);
        if (decay != 0)
          update(ps, g.segment(b, n) + decay * ps, buf.segment(b, n));
        else
          update(ps, g.segment(b, n), buf.segment(b, n));
      });
    }
  }

  // Drops the gradients (the default, so a parameter left out of the next backward is skipped),
  // or zeroes them in place.
  void zero_grad(bool set_to_none = true) { detail::zero_grads(params_, set_to_none); }

  // Any finite value is taken (a schedule stepped once past its end may go below 0, as in
  // PyTorch); step() refuses to use a negative one.
  double lr() const { return options_.lr; }
  void set_lr(double lr) {
    detail::check_hyper(std::isfinite(lr), name, "learning rate", lr, "a finite value");
    options_.lr = lr;
  }
  double momentum() const { return options_.momentum; }
  void set_momentum(double momentum) {
    detail::check_hyper(std::isfinite(momentum), name, "momentum", momentum, "a finite value");
    options_.momentum = momentum;
  }
  const SgdOptions& options() const { return options_; }
  const std::vector<Var<T>>& params() const { return params_; }

  OptimizerState<T> state() const {
    OptimizerState<T> s;
    s.scalars = {{"lr", options_.lr}, {"momentum", options_.momentum}};
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (buffers_[i].defined()) s.tensors.emplace_back(std::to_string(i) + ".momentum_buffer", buffers_[i]);
    return s;
  }
  // Replaces lr, momentum and every momentum buffer with the saved ones (copied); parameters
  // without a saved buffer start afresh. Nothing changes when an entry is invalid.
  void load_state(const OptimizerState<T>& s) {
    std::vector<Tensor<T>> buffers(params_.size());
    for (const auto& [key, t] : s.tensors) {
      const auto index = detail::parse_state_key(name, key, params_.size(), {"momentum_buffer"}).first;
      buffers[index] = detail::loaded_tensor(name, key, t, params_[index].shape());
    }
    SgdOptions options = options_;
    for (const auto& [key, value] : s.scalars) {
      if (key == "lr")
        options.lr = value;
      else if (key == "momentum")
        options.momentum = value;
      else
        fail(name, ": state scalar '", key, "' is unknown, expected lr or momentum");
    }
    detail::check_hyper(std::isfinite(options.lr), name, "saved learning rate", options.lr, "a finite value");
    detail::check_hyper(std::isfinite(options.momentum), name, "saved momentum", options.momentum,
                        "a finite value");
    options_ = options;
    buffers_ = std::move(buffers);
  }

 private:
  void check_options() const { detail::check_sgd_step_options(name, options_); }

  std::vector<Var<T>> params_;
  SgdOptions options_;
  // Momentum buffers, made at a parameter's first step with momentum.
  std::vector<Tensor<T>> buffers_;
};

}  // namespace ptrain
