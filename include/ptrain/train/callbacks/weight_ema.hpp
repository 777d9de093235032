#pragma once
// WeightEma: an exponential moving average of the model's parameters, as timm's ModelEmaV2 and
// Lightning's EMA callbacks keep it: after each optimizer step
//   average = decay * average + (1 - decay) * parameter
// starting from the parameters at fit's start. Validation runs with the averages in the model's
// place (the live weights are put back after it), so the logs, EarlyStopping and ModelCheckpoint
// see the averaged model; the averages go into each checkpoint and come back on resume. Kept on the
// host in float (double for a double model); buffers (batch norm's running statistics) are the
// live model's. Every rank keeps the average of the parameters it holds: the whole model under
// DataParallel, its stage under Pipeline.
//   auto ema = trainer.add_callback(WeightEma<float>(trainer.local_model(), 0.999));
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/tensor/tensor.hpp"
#include "ptrain/train/callback.hpp"

namespace ptrain {

template <class T, class D = Cpu>
class WeightEma {
 public:
  using Average = statistics_t<T>;

  WeightEma(Module<T, D>& model, double decay) : model_(&model), decay_(decay) {
    check(decay > 0 && decay < 1, "WeightEma: decay ", decay, " (expected between 0 and 1, e.g. 0.999)");
    reset();
  }

  // The averages start from the weights fit begins with (after a resume: the checkpoint's
  // averages replace them).
  void on_fit_start(TrainerView&) {
    if (updates_ == 0) reset();
  }
  void on_step_end(TrainerView&, std::int64_t) {
    NoGradGuard no_grad;
    const double keep = decay_, take = 1 - decay_;
    each([&](const std::string&, Tensor<Average>& average, const auto& value) {
      const auto current = on_host(value);
      Average* a = average.data();
      for (std::int64_t i = 0; i < average.numel(); ++i)
        a[i] = static_cast<Average>(keep * a[i] + take * static_cast<double>(current.data()[i]));
    });
    ++updates_;
  }
  void on_validation_start(TrainerView&) { swap_in(); }
  void on_validation_end(TrainerView&, const ValidationResult&) { swap_out(); }
  // fit leaving by an exception in the middle of a validation leaves the live weights in place.
  void on_exception(TrainerView&, const std::exception&) { swap_out(); }

  // The average of the named parameter (as named_parameters() names it).
  const Tensor<Average>& average(const std::string& name) const {
    for (const auto& [n, a] : averages_)
      if (n == name) return a;
    fail("WeightEma: no parameter named '", name, "'");
  }
  std::int64_t updates() const { return updates_; }
  // Writes the averages into the model (for evaluating or saving the averaged model after fit).
  void copy_to_model() {
    each([](const std::string&, Tensor<Average>& average, auto& value) { write(average, value); });
  }

  CallbackState state() const {
    CallbackState s;
    s.scalars.emplace_back("updates", static_cast<double>(updates_));
    for (const auto& [name, average] : averages_) s.tensors.emplace_back(name, tensor_cast<double>(average));
    return s;
  }
  void load_state(const CallbackState& s) {
    for (const auto& [name, value] : s.scalars)
      if (name == "updates") updates_ = static_cast<std::int64_t>(value);
    check(s.tensors.size() == averages_.size(), "WeightEma: the checkpoint holds ", s.tensors.size(),
          " averaged parameters, this model has ", averages_.size());
    for (auto& [name, average] : averages_) {
      const auto saved = std::find_if(s.tensors.begin(), s.tensors.end(), [&](const auto& t) { return t.first == name; });
      check(saved != s.tensors.end(), "WeightEma: the checkpoint holds no average of '", name, "'");
      check(saved->second.shape() == average.shape(), "WeightEma: the checkpoint's average of '", name, "' has shape ",
            saved->second.shape(), ", this model's parameter ", average.shape());
      average = tensor_cast<Average>(saved->second);
    }
  }

 private:
  // f(name, average, the parameter's value) over the parameters, then the float ones of a 16-bit model.
  template <class F>
  void each(const F& f) {
    std::size_t i = 0;
    for (auto& [name, p] : model_->named_parameters()) f(name, averages_[i++].second, p.value());
    for (auto& [name, p] : model_->named_float_parameters()) f(name, averages_[i++].second, p.value());
  }

  template <class V>
  static void write(const Tensor<Average>& average, Tensor<V, D>& value) {
    copy_across(tensor_cast<V>(average).clone(), value);
  }

  void reset() {
    averages_.clear();
    for (auto& [name, p] : model_->named_parameters())
      averages_.emplace_back(name, tensor_cast<Average>(on_host(p.value())).clone());
    for (auto& [name, p] : model_->named_float_parameters())
      averages_.emplace_back(name, tensor_cast<Average>(on_host(p.value())).clone());
    updates_ = 0;
  }

  void swap_in() {
    if (!live_.empty()) return;
    NoGradGuard no_grad;
    for (auto& [name, p] : model_->named_parameters()) live_.emplace_back(on_host(p.value()).clone());
    for (auto& [name, p] : model_->named_float_parameters()) live_float_.emplace_back(on_host(p.value()).clone());
    copy_to_model();
  }
  void swap_out() {
    if (live_.empty()) return;
    NoGradGuard no_grad;
    std::size_t i = 0, j = 0;
    for (auto& [name, p] : model_->named_parameters()) copy_across(live_[i++], p.value());
    for (auto& [name, p] : model_->named_float_parameters()) copy_across(live_float_[j++], p.value());
    live_.clear();
    live_float_.clear();
  }

  Module<T, D>* model_;
  double decay_;
  std::vector<std::pair<std::string, Tensor<Average>>> averages_;
  std::vector<Tensor<T>> live_;  // the live weights while validation runs on the averages
  std::vector<Tensor<float>> live_float_;
  std::int64_t updates_ = 0;
};

}  // namespace ptrain
