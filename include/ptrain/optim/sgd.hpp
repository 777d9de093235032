#pragma once
// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay,
// step for step as torch.optim.SGD (PyTorch 1.13):
//   d = g + weight_decay * p
//   b = d                                   on a parameter's first step with momentum
//   b = momentum * b + (1 - dampening) * d  afterwards
//   d = nesterov ? d + momentum * b : b     (when momentum != 0)
//   p = p - lr * d
// lr and weight_decay are per parameter group (optimizer.hpp), momentum is the optimizer's.
#include <cmath>
#include <limits>
#include <string>
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

// Parameters on any device D; the update runs through kernels/optim.hpp's dispatch point (Eigen
// on the CPU, the indexed algorithm elsewhere) and the momentum buffers live in D's memory.
template <class T, Device D = Cpu>
class Sgd : public detail::GroupedOptimizer<T, D>, public detail::RoundsAsItSteps<D> {
  using detail::GroupedOptimizer<T, D>::groups_;

 public:
  using value_type = T;
  using device_type = D;
  static constexpr const char* name = "SGD";

  Sgd(std::vector<Var<T, D>> params, SgdOptions options) : Sgd(detail::one_group(std::move(params)), options) {}
  // Each group's lr and weight_decay, where set, replace the options'.
  Sgd(std::vector<ParamGroup<T, D>> groups, SgdOptions options)
      : detail::GroupedOptimizer<T, D>(name, std::move(groups), (detail::check_sgd_options(name, options), options.lr),
                                       options.weight_decay),
        options_(options) {
    buffers_.resize(groups_.params().size());
  }

  void step() {
    const kernels::executor_for<D> ex;
    const bool momentum = options_.momentum != 0;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      SgdOptions options = options_;
      options.lr = groups_[g].lr;
      options.weight_decay = groups_[g].weight_decay;
      detail::check_sgd_step_options(name, options);
      for (std::size_t i = groups_[g].begin; i < groups_[g].end; ++i) {
        const Tensor<T, D>* grad = detail::step_grad(name, groups_.params(), i);
        if (!grad) continue;
        Tensor<T, D>& p = groups_.params()[i].value();
        const bool first = momentum && !buffers_[i].defined();
        if (first) buffers_[i] = Tensor<T, D>(p.shape());
        kernels::sgd_step(ex, options, p.data(), grad->data(), momentum ? buffers_[i].data() : nullptr, first,
                          p.numel(), this->rounded_copy(name, i, buffers_.size(), p.numel()));
      }
    }
  }

  double momentum() const { return options_.momentum; }
  void set_momentum(double momentum) {
    detail::check_hyper(std::isfinite(momentum), name, "momentum", momentum, "a finite value");
    options_.momentum = momentum;
  }
  // The options it was made with, momentum as it is now (the rates are the groups').
  const SgdOptions& options() const { return options_; }

  // The momentum buffers on the host: the live buffers on the CPU, copies from another device.
  OptimizerState<T> state() const {
    OptimizerState<T> s;
    groups_.save(s.scalars);
    s.scalars.emplace_back("momentum", options_.momentum);
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (buffers_[i].defined()) s.tensors.emplace_back(std::to_string(i) + ".momentum_buffer", on_host(buffers_[i]));
    return s;
  }
  // Replaces the groups' rates, momentum and every momentum buffer with the saved ones (copied); parameters
  // without a saved buffer start afresh. Nothing changes when an entry is invalid.
  void load_state(const OptimizerState<T>& s) {
    const auto& params = groups_.params();
    std::vector<Tensor<T, D>> buffers(params.size());
    for (const auto& [key, t] : s.tensors) {
      const auto index = detail::parse_state_key(name, key, params.size(), {"momentum_buffer"}).first;
      buffers[index] = on_device<D>(detail::loaded_tensor(name, key, t, params[index].shape()));
    }
    typename detail::ParamGroups<T, D>::Loading rates(groups_);
    SgdOptions options = options_;
    for (const auto& [key, value] : s.scalars) {
      if (key == "momentum")
        options.momentum = value;
      else if (!rates.take(name, key, value))
        fail(name, ": state scalar '", key, "' is unknown, expected lr, momentum, groups or group.<g>.lr");
    }
    detail::check_hyper(std::isfinite(options.momentum), name, "saved momentum", options.momentum,
                        "a finite value");
    rates.apply(name, groups_);
    options_ = options;
    buffers_ = std::move(buffers);
  }

 private:
  SgdOptions options_;
  // Momentum buffers, made at a parameter's first step with momentum.
  std::vector<Tensor<T, D>> buffers_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_KERNEL(ptrain::kernels::cpu::sgd_step<float, ptrain::SgdOptions>)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::cpu::sgd_step<double, ptrain::SgdOptions>)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::Sgd)
