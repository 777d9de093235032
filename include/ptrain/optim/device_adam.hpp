#pragma once
// DeviceAdam<T, D> and DeviceAdamW<T, D>: Adam's and AdamW's update (optim/adam.hpp, torch.optim
// 1.13) for Var<T, D> parameters on a device other than Cpu, one kernels::indexed::adam_step or
// adamw_step per parameter through executor_for<D>, the moments kept on the device.
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/optim.hpp"
#include "ptrain/optim/adam.hpp"
#include "ptrain/optim/detail/params.hpp"

namespace ptrain {

namespace detail {

// The shared body; Decoupled selects AdamW's weight decay (as detail::AdamImpl).
template <class T, Device D, bool Decoupled>
class DeviceAdamImpl {
 public:
  using value_type = T;
  using Options = std::conditional_t<Decoupled, AdamWOptions, AdamOptions>;
  static constexpr const char* name = Decoupled ? "AdamW" : "Adam";

  DeviceAdamImpl(std::vector<Var<T, D>> params, Options options) : params_(std::move(params)), options_(options) {
    check_adam_options(name, options_);
    check_params(name, params_);
    state_.resize(params_.size());
  }

  void step() {
    check_adam_step_options(name, options_);
    const kernels::executor_for<D> ex;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor<T, D>* grad = step_grad(name, params_, i);
      if (!grad) continue;
      Tensor<T, D>& p = params_[i].value();
      auto& st = state_[i];
      if (st.step == 0) {
        st.exp_avg = Tensor<T, D>::zeros(p.shape());
        st.exp_avg_sq = Tensor<T, D>::zeros(p.shape());
        if (options_.amsgrad) st.max_exp_avg_sq = Tensor<T, D>::zeros(p.shape());
      }
      ++st.step;
      const kernels::indexed::AdamBuffers<T> buffers{st.exp_avg.data(), st.exp_avg_sq.data(),
                                                     options_.amsgrad ? st.max_exp_avg_sq.data() : nullptr};
      if constexpr (Decoupled)
        kernels::indexed::adamw_step(ex, options_, st.step, p.data(), grad->data(), buffers, p.numel());
      else
        kernels::indexed::adam_step(ex, options_, st.step, p.data(), grad->data(), buffers, p.numel());
    }
  }

  void zero_grad(bool set_to_none = true) { zero_grads(params_, set_to_none); }

  double lr() const { return options_.lr; }
  void set_lr(double lr) { set_adam_lr(name, options_, lr); }
  // beta1, the knob OneCycleLR cycles.
  double momentum() const { return options_.beta1; }
  void set_momentum(double beta1) { set_adam_beta1(name, options_, beta1); }
  const Options& options() const { return options_; }
  const std::vector<Var<T, D>>& params() const { return params_; }

 private:
  struct ParamState {
    std::int64_t step = 0;  // 0: not created yet; counted on the host, as the bias corrections need it
    Tensor<T, D> exp_avg, exp_avg_sq, max_exp_avg_sq;
  };

  std::vector<Var<T, D>> params_;
  Options options_;
  std::vector<ParamState> state_;
};

}  // namespace detail

template <class T, Device D>
class DeviceAdam : public detail::DeviceAdamImpl<T, D, false> {
 public:
  DeviceAdam(std::vector<Var<T, D>> params, AdamOptions options = {})
      : detail::DeviceAdamImpl<T, D, false>(std::move(params), options) {}
};

template <class T, Device D>
class DeviceAdamW : public detail::DeviceAdamImpl<T, D, true> {
 public:
  DeviceAdamW(std::vector<Var<T, D>> params, AdamWOptions options = {})
      : detail::DeviceAdamImpl<T, D, true>(std::move(params), options) {}
};

// The Adam for parameters on D: Adam on the CPU, DeviceAdam elsewhere (as make_sgd).
template <class T, class D>
auto make_adam(std::vector<Var<T, D>> params, AdamOptions options) {
  if constexpr (std::is_same_v<D, Cpu>) return std::make_shared<Adam<T>>(std::move(params), options);
  else return std::make_shared<DeviceAdam<T, D>>(std::move(params), options);
}

}  // namespace ptrain
