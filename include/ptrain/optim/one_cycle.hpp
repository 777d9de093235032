#pragma once
// OneCycleLR (Smith & Topin), as torch.optim.lr_scheduler.OneCycleLR computes it: the rate
// climbs from max_lr / div_factor to max_lr over the first pct_start of total_steps, then
// anneals to max_lr / div_factor / final_div_factor; three_phase comes back down to the
// initial rate symmetrically before the final anneal. Momentum (SGD's momentum, Adam's beta1)
// moves inversely between max_momentum and base_momentum when cycle_momentum is on.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <optional>

#include "ptrain/core/error.hpp"
#include "ptrain/optim/schedule.hpp"

namespace ptrain {

enum class Anneal { cos, linear };

struct OneCycleLR {
  double max_lr = std::numeric_limits<double>::quiet_NaN();
  std::int64_t total_steps = 0;
  double pct_start = 0.3;
  Anneal anneal = Anneal::cos;
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;

  // Valid for step in [0, total_steps]; PyTorch also accepts the step after the last one.
  double lr_at(std::int64_t step) const {
    const Point at = locate(step);
    const double initial = max_lr / div_factor;
    const double min_lr = initial / final_div_factor;
    if (three_phase) {
      static constexpr int from[3] = {0, 1, 0}, to[3] = {1, 0, 2};
      const double level[3] = {initial, max_lr, min_lr};
      return interpolate(level[from[at.phase]], level[to[at.phase]], at.pct);
    }
    return at.phase == 0 ? interpolate(initial, max_lr, at.pct) : interpolate(max_lr, min_lr, at.pct);
  }

  std::optional<double> momentum_at(std::int64_t step) const {
    if (!cycle_momentum) return std::nullopt;
    check(base_momentum <= max_momentum, "OneCycleLR: base_momentum ", base_momentum,
          " exceeds max_momentum ", max_momentum);
    const Point at = locate(step);
    switch (at.phase) {
      case 0: return interpolate(max_momentum, base_momentum, at.pct);
      case 1: return interpolate(base_momentum, max_momentum, at.pct);
      default: return max_momentum;
    }
  }

 private:
  struct Point {
    int phase;
    double pct;  // position within the phase, 0 at its start and 1 at its end
  };

  // Which phase step falls in, with PyTorch's phase ends: pct_start * total - 1, then
  // (three_phase) 2 * pct_start * total - 2, then total - 1.
  Point locate(std::int64_t step) const {
    detail::check_schedule_lr("OneCycleLR", "max_lr", max_lr);
    check(total_steps > 0, "OneCycleLR: total_steps is ", total_steps, ", expected a positive step count");
    check(pct_start >= 0 && pct_start <= 1, "OneCycleLR: pct_start is ", pct_start,
          ", expected a value in [0, 1]");
    check(div_factor > 0 && final_div_factor > 0, "OneCycleLR: div_factor ", div_factor, " and final_div_factor ",
          final_div_factor, " must be positive");
    detail::check_schedule_step("OneCycleLR", step);
    check(step <= total_steps, "OneCycleLR: tried to step ", step + 1, " times; total_steps is ", total_steps,
          " (make total_steps cover every scheduler step)");
    const double total = static_cast<double>(total_steps);
    const double ends[3] = {pct_start * total - 1, 2 * pct_start * total - 2, total - 1};
    const int phases = three_phase ? 3 : 2;
    const double s = static_cast<double>(step);
    double start = 0;
    for (int i = 0; i < phases; ++i) {
      const double end = (i == phases - 1) ? ends[2] : ends[i];
      if (s <= end || i == phases - 1) {
        check(end != start, "OneCycleLR: phase ", i + 1, " of ", phases, " is empty (it ends at step ", end,
              " where it starts) with total_steps ", total_steps, " and pct_start ", pct_start);
        return {i, (s - start) / (end - start)};
      }
      start = end;
    }
    return {phases - 1, 1};  // not reached: the last phase takes every step
  }

  double interpolate(double from, double to, double pct) const {
    if (anneal == Anneal::cos) return to + (from - to) / 2 * (std::cos(std::numbers::pi * pct) + 1);
    return (to - from) * pct + from;
  }
};

}  // namespace ptrain
