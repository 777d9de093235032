#pragma once
// The check the Trainer makes before each optimizer step: a loss or a gradient that is inf or NaN
// would turn every weight into NaN, after which training goes on with `loss nan` and learns
// nothing. The step stops with a sentence naming the step, epoch, rank and the first parameter whose
// gradient is not finite (TrainerOptions::terminate_on_nan, the default), or is skipped.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/reduce.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/tensor/tensor.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

// A parameter whose gradient holds inf or NaN: its name (named_parameters') and how many.
struct NonFiniteGradient {
  std::string name;
  std::int64_t count = 0, numel = 0;
};

// The first trained parameter, in named_parameters() order (then a 16-bit model's
// named_float_parameters()), whose gradient holds an inf or NaN; none when all are finite (a
// frozen parameter's stale gradient is not stepped, so not checked). One count per parameter in
// D's memory and one copy back for them all.
template <class T, class D>
std::optional<NonFiniteGradient> first_non_finite_gradient(const Module<T, D>& model) {
  const auto named = model.named_parameters();
  const auto named_float = model.named_float_parameters();
  const std::size_t n = named.size() + named_float.size();
  if (n == 0) return std::nullopt;
  Tensor<double, D> counts(Shape{static_cast<std::int64_t>(n)});
  counts.zero();
  const auto count = [&](const auto& p, std::size_t i) {
    const auto& g = p.grad();
    if (p.requires_grad() && g.defined() && g.numel() > 0)
      kernels::count_non_finite(kernels::executor_for<D>{}, g.data(), g.numel(), counts.data() + i);
  };
  for (std::size_t i = 0; i < named.size(); ++i) count(named[i].second, i);
  for (std::size_t i = 0; i < named_float.size(); ++i) count(named_float[i].second, named.size() + i);
  const std::vector<double> host = counts.to_vector();
  for (std::size_t i = 0; i < n; ++i)
    if (host[i] > 0) {
      const bool wide = i >= named.size();
      const std::string& name = wide ? named_float[i - named.size()].first : named[i].first;
      const std::int64_t numel = wide ? named_float[i - named.size()].second.numel() : named[i].second.numel();
      return NonFiniteGradient{name, static_cast<std::int64_t>(host[i]), numel};
    }
  return std::nullopt;
}

// Where a step happened, for the message: epoch 0 when the step ran outside Trainer::fit.
struct StepPlace {
  std::int64_t step = 0;  // the optimizer step, from 1
  int epoch = 0;          // from 1, as the epoch lines count
  std::int64_t batch = 0;  // within the epoch, from 1
  int rank = 0;
};

// "the loss is nan at step 3 (epoch 1, batch 3) on rank 0, and the gradient of 'fc.weight' holds
// 12 inf or NaN values of 20": what happened, where, and the first parameter it reached. loss is
// none on a rank that computes no loss (a pipeline stage before the last).
inline std::string non_finite_step_text(std::optional<double> loss, const std::optional<NonFiniteGradient>& gradient,
                                        const StepPlace& at) {
  std::string where = " at step " + std::to_string(at.step);
  if (at.epoch > 0) where += " (epoch " + std::to_string(at.epoch) + ", batch " + std::to_string(at.batch) + ")";
  where += " on rank " + std::to_string(at.rank);
  std::string text;
  if (!loss)
    text = "at a pipeline stage without the loss," + where.substr(3) + ",";
  else if (std::isfinite(*loss))
    text = "the loss is finite" + where + ", but";
  else
    text = std::string("the loss is ") + (std::isnan(*loss) ? "nan" : *loss > 0 ? "inf" : "-inf") + where + ", and";
  if (gradient)
    text += " the gradient of '" + gradient->name + "' holds " + std::to_string(gradient->count) + " inf or NaN values of " +
            std::to_string(gradient->numel) + " (the first parameter, in named_parameters() order, whose gradient does)";
  else
    text += " every gradient is finite";
  return text;
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::first_non_finite_gradient)
