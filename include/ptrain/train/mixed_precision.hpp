#pragma once
// MixedPrecision<Fp16 | Bf16>: Apex O2 / torch.amp training as a Trainer policy. The model is
// built in half or bfloat16 and computes in it (products and sums in float, see kernels/); the
// optimizer steps fp32 master copies of its parameters; each step the 16-bit gradients are
// copied to the masters and unscaled, and the masters are copied back rounded.
#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ptrain/core/log.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/parallel/compression.hpp"
#include "ptrain/train/loss_scaler.hpp"

namespace ptrain {

// Usage, with the policies' order mattering only beside DataParallel (put this one after it, so
// that it reads averaged gradients and its masters start from the broadcast weights):
//   auto model = make<SmallCnn<bfloat16>>();
//   MixedPrecision<Bf16> amp(*model);
//   auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1});
//   Trainer<SmallCnn<bfloat16>, MixedPrecision<Bf16>> trainer(model, sgd, {}, amp);
// Fp16 scales the loss dynamically (LossScaler, Apex's rule); a step whose gradients hold an inf
// or NaN is skipped, masters and model untouched, and prints Apex's line
// "Gradient overflow. Skipping step, loss scale reduced to 32768.0". Bf16 has float's range and
// scales nothing (scale 1), but still skips a step with inf or NaN gradients.
// Batch norm weights and buffers are stored in the 16-bit type (Apex O2 keeps them in fp32); their
// statistics and updates are computed in float.
template <class Precision>
class MixedPrecision {
  static_assert(std::same_as<Precision, Fp16> || std::same_as<Precision, Bf16>,
                "MixedPrecision<Fp16> or MixedPrecision<Bf16>: a float model trains without this policy "
                "(see docs/policies.md)");

 public:
  using scalar_type = typename Precision::template wire<float>;  // half or bfloat16
  using T = scalar_type;

  // Fp16: Apex's dynamic loss scaling from 2^16. Bf16: none.
  static LossScalerOptions default_scaling() {
    if constexpr (std::same_as<Precision, Fp16>) return {};
    else return {.initial_scale = 1.0, .dynamic = false};
  }

  explicit MixedPrecision(const Module<T>& model, LossScalerOptions scaling = default_scaling())
      : params_(model.parameters()), scaler_(scaling) {
    check(!params_.empty(), "MixedPrecision<", Precision::name, ">: the model has no parameters");
    masters_.reserve(params_.size());
    for (const auto& p : params_) masters_.emplace_back(tensor_cast<float>(p.value()), p.requires_grad());
  }

  // The fp32 copies the optimizer steps, in the model's parameter order.
  const std::vector<Var<float>>& master_parameters() const { return masters_; }
  double loss_scale() const { return scaler_.scale(); }
  const LossScaler& scaler() const { return scaler_; }

  // The Trainer's model must be the one the masters were made from. Its weights may have changed
  // since (DataParallel broadcasts rank 0's just before): the masters start from them.
  void setup(Module<T>& model) {
    const auto params = model.parameters();
    bool same = params.size() == params_.size();
    for (std::size_t i = 0; same && i < params.size(); ++i) same = params[i].node() == params_[i].node();
    check(same, "MixedPrecision<", Precision::name, ">: the Trainer's model is not the one this policy was made from");
    for (std::size_t i = 0; i < params_.size(); ++i) copy(params_[i].value(), masters_[i].value());
  }

  // Copies the gradients into the masters' and unscales them; false (skip the step) when one holds
  // an inf or NaN, after updating the loss scale.
  bool before_optimizer_step(Module<T>&) {
    const auto inverse = static_cast<float>(1.0 / scaler_.scale());
    bool finite = true;
    for (std::size_t i = 0; i < params_.size() && finite; ++i) {
      const Var<T>& p = params_[i];
      Var<float>& master = masters_[i];
      master.set_requires_grad(p.requires_grad());
      if (!p.requires_grad() || !p.grad().defined()) {
        master.zero_grad();
        continue;
      }
      Tensor<float>& g = master.grad();
      if (!g.defined() || g.shape() != p.shape()) g = Tensor<float>(p.shape());
      copy(p.grad(), g);
      if (inverse != 1.0f) g.array() *= inverse;
      finite = std::isfinite(g.array().abs().template maxCoeff<Eigen::PropagateNaN>());
    }
    scaler_.update(!finite);
    skipped_ = !finite;
    if (finite) return true;
    for (auto& master : masters_) master.zero_grad();
    log_line(std::string("Gradient overflow. Skipping step, loss scale ") +
             (scaler_.dynamic() ? "reduced to " : "stays ") + python_float(scaler_.scale()));
    return false;
  }

  // The stepped masters, rounded, become the model's weights.
  void after_optimizer_step(Module<T>&) {
    if (skipped_) {
      skipped_ = false;
      return;
    }
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].requires_grad()) copy(masters_[i].value(), params_[i].value());
  }

 private:
  template <class From, class To>
  static void copy(const Tensor<From>& from, Tensor<To>& to) {
    const auto n = static_cast<std::size_t>(from.numel());
    convert(std::span<const From>(from.data(), n), std::span<To>(to.data(), n));
  }

  std::vector<Var<T>> params_;
  std::vector<Var<float>> masters_;
  LossScaler scaler_;
  bool skipped_ = false;
};

}  // namespace ptrain
