#pragma once
// Learning-rate schedules as values: lr_at(step) is the rate after `step` scheduler steps
// (epochs or iterations, whichever the caller counts), in closed form, as PyTorch's schedulers
// compute it. Wrappers compose: LinearWarmup<Scaled<StepLR>> is the linear scaling rule of
// Goyal et al. over a step decay. Scheduler (scheduler.hpp) applies one to an optimizer.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <numbers>
#include <optional>
#include <utility>

#include "ptrain/core/error.hpp"

namespace ptrain {

template <class S>
concept LrSchedule = requires(const S& s, std::int64_t step) {
  { s.lr_at(step) } -> std::convertible_to<double>;
};

// A schedule that also sets the optimizer's momentum (OneCycleLR); nullopt leaves it alone.
template <class S>
concept MomentumSchedule = LrSchedule<S> && requires(const S& s, std::int64_t step) {
  { s.momentum_at(step) } -> std::convertible_to<std::optional<double>>;
};

namespace detail {
inline void check_schedule_lr(const char* schedule, const char* field, double lr) {
  check(std::isfinite(lr) && lr >= 0, schedule, ": ", field, " is ", lr,
        std::isnan(lr) ? " (not set)" : "", ", expected a finite value >= 0");
}
inline void check_schedule_step(const char* schedule, std::int64_t step) {
  check(step >= 0, schedule, ": step ", step, " is negative");
}
}  // namespace detail

// The same rate at every step.
struct FixedLR {
  double lr = std::numeric_limits<double>::quiet_NaN();

  double lr_at(std::int64_t step) const {
    detail::check_schedule_lr("FixedLR", "lr", lr);
    detail::check_schedule_step("FixedLR", step);
    return lr;
  }
};

// base_lr * gamma^(step / step_size), as torch.optim.lr_scheduler.StepLR.
struct StepLR {
  double base_lr = std::numeric_limits<double>::quiet_NaN();
  std::int64_t step_size = 0;
  double gamma = 0.1;

  double lr_at(std::int64_t step) const {
    detail::check_schedule_lr("StepLR", "base_lr", base_lr);
    detail::check_schedule_step("StepLR", step);
    check(step_size > 0, "StepLR: step_size is ", step_size, ", expected a positive step count");
    return base_lr * std::pow(gamma, static_cast<double>(step / step_size));
  }
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * step / t_max)) / 2: the closed form of
// torch.optim.lr_scheduler.CosineAnnealingLR (periodic past t_max, like PyTorch's).
struct CosineAnnealingLR {
  double base_lr = std::numeric_limits<double>::quiet_NaN();
  std::int64_t t_max = 0;
  double eta_min = 0;

  double lr_at(std::int64_t step) const {
    detail::check_schedule_lr("CosineAnnealingLR", "base_lr", base_lr);
    detail::check_schedule_step("CosineAnnealingLR", step);
    check(t_max > 0, "CosineAnnealingLR: t_max is ", t_max, ", expected a positive step count");
    const double phase = std::numbers::pi * static_cast<double>(step) / static_cast<double>(t_max);
    return eta_min + (base_lr - eta_min) * (1 + std::cos(phase)) / 2;
  }
};

// BERT's and ALBERT's schedule, HuggingFace's get_linear_schedule_with_warmup: the rate climbs
// linearly from 0 at step 0 to base_lr at warmup_steps, then falls linearly to 0 at total_steps
// and stays 0.
struct WarmupLinearDecay {
  double base_lr = std::numeric_limits<double>::quiet_NaN();
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;

  double lr_at(std::int64_t step) const {
    detail::check_schedule_lr("WarmupLinearDecay", "base_lr", base_lr);
    detail::check_schedule_step("WarmupLinearDecay", step);
    check(warmup_steps >= 0 && total_steps >= warmup_steps, "WarmupLinearDecay: warmup_steps ", warmup_steps,
          " and total_steps ", total_steps, ", expected 0 <= warmup_steps <= total_steps");
    if (step < warmup_steps) return base_lr * static_cast<double>(step) / static_cast<double>(warmup_steps);
    const auto decay = static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps));
    return base_lr * std::max(0.0, static_cast<double>(total_steps - step) / decay);
  }
};

// The inner schedule times factor.
template <LrSchedule S>
struct Scaled {
  S inner;
  double factor = 1;

  Scaled(S inner_schedule, double scale) : inner(std::move(inner_schedule)), factor(scale) {
    check(std::isfinite(factor) && factor >= 0, "Scaled: factor is ", factor, ", expected a finite value >= 0");
  }
  double lr_at(std::int64_t step) const { return factor * inner.lr_at(step); }
  std::optional<double> momentum_at(std::int64_t step) const requires MomentumSchedule<S> {
    return inner.momentum_at(step);
  }
};

// The inner schedule times a factor that climbs linearly from start_factor at step 0 to 1 at
// warmup_steps and stays 1: PyTorch's ChainedScheduler([LinearLR(start_factor, 1,
// warmup_steps), inner]). The inner schedule keeps counting from step 0 (its decay milestones
// are not shifted by the warm-up). warmup_steps = 0 means no warm-up.
template <LrSchedule S>
struct LinearWarmup {
  S inner;
  std::int64_t warmup_steps = 0;
  double start_factor = 1.0 / 3;  // PyTorch's LinearLR default

  LinearWarmup(S inner_schedule, std::int64_t steps, double start = 1.0 / 3)
      : inner(std::move(inner_schedule)), warmup_steps(steps), start_factor(start) {
    check(warmup_steps >= 0, "LinearWarmup: warmup_steps is ", warmup_steps, ", expected >= 0");
    check(start_factor >= 0 && start_factor <= 1, "LinearWarmup: start_factor is ", start_factor,
          ", expected a value in [0, 1]");
  }
  double factor_at(std::int64_t step) const {
    detail::check_schedule_step("LinearWarmup", step);
    if (step >= warmup_steps) return 1;
    return start_factor + (1 - start_factor) * static_cast<double>(step) / static_cast<double>(warmup_steps);
  }
  double lr_at(std::int64_t step) const { return factor_at(step) * inner.lr_at(step); }
  std::optional<double> momentum_at(std::int64_t step) const requires MomentumSchedule<S> {
    return inner.momentum_at(step);
  }
};

// The linear scaling rule (Goyal et al. 2017): with world_size workers each keeping its batch,
// the rate is world_size times the single-worker one, reached by a linear ramp from the
// single-worker rate over warmup_steps.
template <LrSchedule S>
LinearWarmup<Scaled<S>> linear_scaling(S single_worker, int world_size, std::int64_t warmup_steps) {
  check(world_size >= 1, "linear_scaling: world_size is ", world_size, ", expected >= 1");
  return LinearWarmup<Scaled<S>>(Scaled<S>(std::move(single_worker), world_size), warmup_steps,
                                 1.0 / world_size);
}
inline LinearWarmup<Scaled<FixedLR>> linear_scaling(double base_lr, int world_size, std::int64_t warmup_steps) {
  detail::check_schedule_lr("linear_scaling", "base_lr", base_lr);
  return linear_scaling(FixedLR{base_lr}, world_size, warmup_steps);
}

}  // namespace ptrain
