#pragma once
// DeviceSgd<T, D>: Sgd's update (optim/sgd.hpp, torch.optim.SGD 1.13) for Var<T, D> parameters on
// a device other than Cpu, one kernels::indexed::sgd_step per parameter through executor_for<D>.
// The CPU's Sgd<T> keeps its Eigen loops.
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/optim.hpp"
#include "ptrain/optim/detail/params.hpp"
#include "ptrain/optim/sgd.hpp"

namespace ptrain {

template <class T, Device D>
class DeviceSgd {
 public:
  using value_type = T;
  static constexpr const char* name = "SGD";

  DeviceSgd(std::vector<Var<T, D>> params, SgdOptions options) : params_(std::move(params)), options_(options) {
    detail::check_sgd_options(name, options_);
    detail::check_params(name, params_);
    buffers_.resize(params_.size());
  }

  void step() {
    detail::check_sgd_step_options(name, options_);
    const kernels::executor_for<D> ex;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor<T, D>* grad = detail::step_grad(name, params_, i);
      if (!grad) continue;
      Tensor<T, D>& p = params_[i].value();
      const bool first = options_.momentum != 0 && !buffers_[i].defined();
      if (first) buffers_[i] = Tensor<T, D>(p.shape());
      kernels::indexed::sgd_step(ex, options_, p.data(), grad->data(),
                                 options_.momentum != 0 ? buffers_[i].data() : nullptr, first, p.numel());
    }
  }

  void zero_grad(bool set_to_none = true) { detail::zero_grads(params_, set_to_none); }

  double lr() const { return options_.lr; }
  void set_lr(double lr) {
    detail::check_hyper(std::isfinite(lr), name, "learning rate", lr, "a finite value");
    options_.lr = lr;
  }
  const SgdOptions& options() const { return options_; }
  const std::vector<Var<T, D>>& params() const { return params_; }

 private:
  std::vector<Var<T, D>> params_;
  SgdOptions options_;
  // Momentum buffers on the device, made at a parameter's first step with momentum.
  std::vector<Tensor<T, D>> buffers_;
};

// The SGD for parameters on D: Sgd on the CPU, DeviceSgd elsewhere (code generic over devices).
template <class T, class D>
auto make_sgd(std::vector<Var<T, D>> params, SgdOptions options) {
  if constexpr (std::is_same_v<D, Cpu>) return std::make_shared<Sgd<T>>(std::move(params), options);
  else return std::make_shared<DeviceSgd<T, D>>(std::move(params), options);
}

}  // namespace ptrain
