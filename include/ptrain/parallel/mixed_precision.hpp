#pragma once
// MixedPrecision<Fp16 | Bf16>: Apex O2 / torch.amp training as a Trainer policy. The model is
// built in half or bfloat16 and computes in it (products and sums in float, see kernels/); the
// optimizer steps fp32 master copies of its parameters; each step the 16-bit gradients are
// copied to the masters and unscaled, and the masters are copied back rounded. The model's float
// parameters (batch norm's weight and bias) are their own masters, unscaled in place.
#include <algorithm>
#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/kernels/cast.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/optim.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/parallel/compression.hpp"
#include "ptrain/parallel/loss_scaler.hpp"

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
// scales nothing (scale 1), but still skips a step with inf or NaN gradients. Under a Pipeline
// each stage checks its own gradients and the Trainer makes one stage's skip every stage's, so
// the scale moves in step on all ranks. Outside a Trainer: ok = before_optimizer_step(model), the
// optimizer's step if ok, step_decided(ok), after_optimizer_step(model).
// Batch norm stays float in the 16-bit model, as Apex O2's keep_batchnorm_fp32: BatchNorm2d's
// weight, bias and running statistics are float, the op runs in float on the widened input
// (autograd/ops/batch_norm.hpp). Those weights (the model's float_parameters()) are stepped in
// place: master_parameters() holds them after the masters of the 16-bit ones.
//
// On any device D (MixedPrecision<Fp16, Cuda>, a model of Var<half, Cuda>) the masters are
// Var<float, D> (step them with Sgd<float, D> or Adam<float, D>); the casts and the unscaling run
// through their dispatch points (kernels/cast.hpp, kernels/optim.hpp), and the inf/NaN check is
// one flag in D's memory, read back once per step. A model is anything whose parameters() gives
// the Var<T, D>s, in a fixed order (and float_parameters() its Var<float, D>s, if it has any).
// A master whose storage was let go (Sharded keeps each rank's own only) is left alone: no
// gradient, no rounding.
template <class Precision, class D = Cpu>
class MixedPrecision {
  static_assert(std::same_as<Precision, Fp16> || std::same_as<Precision, Bf16>,
                "MixedPrecision<Fp16> or MixedPrecision<Bf16>: a float model trains without this policy "
                "(see docs/policies.md)");

 public:
  using scalar_type = typename Precision::template wire<float>;  // half or bfloat16
  using T = scalar_type;
  using device_type = D;

  // Fp16: Apex's dynamic loss scaling from 2^16. Bf16: none.
  static LossScalerOptions default_scaling() {
    if constexpr (std::same_as<Precision, Fp16>) return {};
    else return {.initial_scale = 1.0, .dynamic = false};
  }

  template <class Model>
  explicit MixedPrecision(const Model& model, LossScalerOptions scaling = default_scaling())
      : params_(parameters_of(model)), scaler_(scaling) {
    const std::vector<Var<float, D>> float_params = float_parameters_of(model);
    check(!params_.empty() || !float_params.empty(), "MixedPrecision<", Precision::name,
          ">: the model has no parameters");
    masters_.reserve(params_.size() + float_params.size());
    for (const auto& p : params_) {
      Tensor<float, D> master(p.shape());
      copy(p.value(), master);
      masters_.emplace_back(std::move(master), p.requires_grad());
    }
    masters_.insert(masters_.end(), float_params.begin(), float_params.end());
    rounded_by_optimizer_.assign(params_.size(), false);
  }

  // What the optimizer steps: the fp32 copies of the 16-bit parameters, in the model's parameter
  // order, then the model's float parameters themselves.
  const std::vector<Var<float, D>>& master_parameters() const { return masters_; }
  // Of each master, the node of the model parameter it stands for (a float parameter is its own):
  // how a policy that knows the model's parameters (Sharded over a pipeline stage) finds their masters.
  std::vector<const void*> master_sources() const {
    std::vector<const void*> sources;
    sources.reserve(masters_.size());
    for (const auto& p : params_) sources.push_back(p.node().get());
    for (std::size_t i = params_.size(); i < masters_.size(); ++i) sources.push_back(masters_[i].node().get());
    return sources;
  }
  // Hands the rounding of the masters among an optimizer's parameters to the optimizer, for one that
  // rounds as it steps (Sgd, Adam, AdamW: round_into), so a master is read once a step, not twice:
  // returns, per parameter, the model parameter it rounds into (empty for the float ones and any
  // other), and from then on after_optimizer_step leaves those to it. The Trainer calls this.
  std::vector<RoundedParameter<D>> hand_rounding_to_optimizer(const std::vector<Var<float, D>>& optimizer_params) {
    std::map<const void*, std::size_t> master_index;
    for (std::size_t i = 0; i < params_.size(); ++i) master_index.emplace(masters_[i].node().get(), i);
    std::vector<RoundedParameter<D>> rounded(optimizer_params.size());
    for (std::size_t k = 0; k < optimizer_params.size(); ++k)
      if (const auto it = master_index.find(optimizer_params[k].node().get()); it != master_index.end()) {
        rounded[k] = params_[it->second];
        rounded_by_optimizer_[it->second] = true;
      }
    return rounded;
  }
  // How many masters the optimizer rounds (hand_rounding_to_optimizer); this policy rounds the others.
  std::size_t masters_rounded_by_optimizer() const {
    return static_cast<std::size_t>(std::count(rounded_by_optimizer_.begin(), rounded_by_optimizer_.end(), true));
  }
  double loss_scale() const { return scaler_.scale(); }
  const LossScaler& scaler() const { return scaler_; }

  // The Trainer's model (or this rank's pipeline stage of it) must be the one the masters were
  // made from. Its weights may have changed since (DataParallel broadcasts rank 0's just before):
  // the masters start from them. A stage's parameters are a part of the model's; the masters of
  // the others get no gradient here, so the optimizer leaves them alone.
  template <class Model>
  void setup(Model& model) {
    std::set<const void*> ours;
    for (const auto& p : params_) ours.insert(p.node().get());
    for (std::size_t i = params_.size(); i < masters_.size(); ++i) ours.insert(masters_[i].node().get());
    std::vector<const void*> theirs;
    for (const auto& p : parameters_of(model)) theirs.push_back(p.node().get());
    for (const auto& p : float_parameters_of(model)) theirs.push_back(p.node().get());
    for (const void* p : theirs)
      check(ours.count(p) == 1, "MixedPrecision<", Precision::name,
            ">: the Trainer's model is not the one this policy was made from");
    for (std::size_t i = 0; i < params_.size(); ++i) copy(params_[i].value(), masters_[i].value());
  }

  // Copies the gradients into the masters' and unscales them; false (skip the step) when one holds
  // an inf or NaN. The loss scale moves in step_decided, once every rank has said (as
  // GradScaler's step() and update()).
  template <class Model>
  bool before_optimizer_step(Model&) {
    start_inf_check();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Var<T, D>& p = params_[i];
      Var<float, D>& master = masters_[i];
      master.set_requires_grad(p.requires_grad());
      if (!p.requires_grad() || !p.grad().defined() || !master.value().defined()) {
        master.zero_grad();
        continue;
      }
      Tensor<float, D>& g = master.grad();
      if (!g.defined() || g.shape() != p.shape()) g = Tensor<float, D>(p.shape());
      unscale(p.grad(), g);
    }
    for (std::size_t i = params_.size(); i < masters_.size(); ++i)
      if (masters_[i].requires_grad() && masters_[i].grad().defined()) unscale(masters_[i].grad(), masters_[i].grad());
    return no_inf_found();
  }

  // Whether the step runs on every rank: a skipped one (an overflow here or on another pipeline
  // stage) lowers the loss scale, a taken one counts towards raising it (LossScaler).
  void step_decided(bool stepped) {
    scaler_.update(!stepped);
    skipped_ = !stepped;
    if (stepped) return;
    for (auto& master : masters_) master.zero_grad();
    log_line(std::string("Gradient overflow. Skipping step, loss scale ") +
             (scaler_.dynamic() ? "reduced to " : "stays ") + python_float(scaler_.scale()));
  }

  // Trainer points (checkpoints): the fp32 masters ("master.<index>", the model's parameter order)
  // and the loss scaler; a load checks every master's shape before changing anything.
  OptimizerState<float> checkpoint_state() const {
    OptimizerState<float> s;
    s.scalars = {{"loss_scale", scaler_.scale()}, {"clean_steps", static_cast<double>(scaler_.clean_steps())}};
    for (std::size_t i = 0; i < masters_.size(); ++i) {
      check(masters_[i].value().defined(), "MixedPrecision<", Precision::name, ">: master.", i,
            " is held by another rank (Sharded): gather_parameters() before saving (the Trainer does)");
      s.tensors.emplace_back("master." + std::to_string(i), on_host(masters_[i].value()));
    }
    return s;
  }
  void load_checkpoint_state(const OptimizerState<float>& s) {
    const std::string who = std::string("MixedPrecision<") + Precision::name + ">: checkpoint state";
    std::vector<const Tensor<float>*> saved(masters_.size(), nullptr);
    for (const auto& [key, t] : s.tensors) {
      std::size_t i = masters_.size();
      if (key.rfind("master.", 0) == 0) {
        const auto [end, error] = std::from_chars(key.data() + 7, key.data() + key.size(), i);
        if (error != std::errc{} || end != key.data() + key.size()) i = masters_.size();
      }
      const bool named = i < masters_.size();
      check(named, who, ": unexpected tensor '", key, "' (expected master.0 .. master.", masters_.size() - 1, ")");
      check(masters_[i].value().defined(), who, ": master.", i,
            " is held by another rank (Sharded): gather_parameters() before loading (the Trainer does)");
      check(t.shape() == masters_[i].shape(), who, ": ", key, " has shape ", t.shape(), ", the parameter has ",
            masters_[i].shape());
      saved[i] = &t;
    }
    for (std::size_t i = 0; i < saved.size(); ++i) check(saved[i] != nullptr, who, ": master.", i, " is missing");
    double scale = scaler_.scale(), clean = 0;
    for (const auto& [key, value] : s.scalars) {
      check(key == "loss_scale" || key == "clean_steps", who, ": unknown scalar '", key, "'");
      (key == "loss_scale" ? scale : clean) = value;
    }
    scaler_.restore(scale, static_cast<int>(clean));
    for (std::size_t i = 0; i < saved.size(); ++i) masters_[i].value().copy_from(on_device<D>(*saved[i]));
  }

  // The stepped masters, rounded, become the model's weights (those this rank holds: under Sharded
  // another rank's masters, and under Zero3 its weights, are not here; that rank rounds them), but
  // for those the optimizer wrote as it stepped (hand_rounding_to_optimizer).
  // Then the masters let go of their gradients, as torch's zero_grad(set_to_none=True): the next
  // step writes them afresh from the model's, and until then the forward would carry four bytes a
  // parameter for nothing (VGG-16: 537 MB). The model's float parameters are its own to clear.
  template <class Model>
  void after_optimizer_step(Model&) {
    if (!std::exchange(skipped_, false))
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (!rounded_by_optimizer_[i] && params_[i].requires_grad() && params_[i].value().defined() &&
            masters_[i].value().defined())
          copy(masters_[i].value(), params_[i].value());
    for (std::size_t i = 0; i < params_.size(); ++i) masters_[i].zero_grad();
  }

 private:
  template <class Model>
  static std::vector<Var<T, D>> parameters_of(const Model& model) {
    static_assert(std::convertible_to<decltype(model.parameters()), std::vector<Var<T, D>>>,
                  "MixedPrecision<Precision, D>: the model's parameters() must give std::vector<Var<T, D>>, "
                  "T the precision's 16-bit type (half for Fp16, bfloat16 for Bf16) and D this policy's device");
    return model.parameters();
  }
  template <class Model>
  static std::vector<Var<float, D>> float_parameters_of(const Model& model) {
    if constexpr (requires { model.float_parameters(); }) return model.float_parameters();
    else return {};
  }

  template <class From, class To>
  static void copy(const Tensor<From, D>& from, Tensor<To, D>& to) {
    kernels::cast(kernels::executor_for<D>{}, from.data(), to.data(), from.numel());
  }

  // The inf/NaN check is one flag in D's memory, zeroed here and read back once by no_inf_found.
  void start_inf_check() {
    if (!found_inf_.defined()) found_inf_ = Tensor<std::int32_t, D>(Shape{1});
    found_inf_.zero();
  }

  // master_grad = grad / scale, raising the flag on an inf or NaN; grad may be master_grad.
  template <class G>
  void unscale(const Tensor<G, D>& grad, Tensor<float, D>& master_grad) {
    kernels::unscale_gradients(kernels::executor_for<D>{}, grad.data(), master_grad.data(), grad.numel(),
                               scaler_.scale(), found_inf_.data());
  }

  bool no_inf_found() const { return found_inf_.to_vector()[0] == 0; }  // the step's one device-to-host copy

  std::vector<Var<T, D>> params_;
  std::vector<Var<float, D>> masters_;  // params_' masters, then the model's float parameters
  std::vector<bool> rounded_by_optimizer_;  // per params_ entry
  LossScaler scaler_;
  Tensor<std::int32_t, D> found_inf_;
  bool skipped_ = false;
};

}  // namespace ptrain
