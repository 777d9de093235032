#pragma once
// Scheduler: drives an optimizer's learning rate (and momentum, for OneCycleLR) from a
// schedule, like a torch.optim.lr_scheduler object: making it sets the rate for step 0, and
// each step() advances one step (call it after optimizer.step(), per epoch or per iteration).
#include <cstdint>
#include <optional>
#include <utility>

#include "ptrain/core/error.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/optim/schedule.hpp"

namespace ptrain {

template <Optimizer O, LrSchedule S>
class Scheduler {
 public:
  // step > 0 resumes a run at that scheduler step (PyTorch's last_epoch).
  Scheduler(O& optimizer, S schedule, std::int64_t step = 0)
      : optimizer_(&optimizer), schedule_(std::move(schedule)), step_(step) {
    apply();
  }

  void step() {
    ++step_;
    apply();
  }
  // The number of step() calls so far (what a checkpoint saves); setting it applies that step.
  std::int64_t step_count() const { return step_; }
  void set_step_count(std::int64_t step) {
    step_ = step;
    apply();
  }
  double lr() const { return optimizer_->lr(); }
  const S& schedule() const { return schedule_; }
  O& optimizer() const { return *optimizer_; }

 private:
  void apply() {
    check(step_ >= 0, "Scheduler: step ", step_, " is negative");
    optimizer_->set_lr(schedule_.lr_at(step_));
    if constexpr (MomentumSchedule<S>) {
      if (const std::optional<double> m = schedule_.momentum_at(step_)) {
        if constexpr (MomentumOptimizer<O>)
          optimizer_->set_momentum(*m);
        else
          fail("Scheduler: the schedule cycles momentum but the optimizer has no momentum()/set_momentum(); "
               "turn cycle_momentum off");
      }
    }
  }

  O* optimizer_;
  S schedule_;
  std::int64_t step_;
};

}  // namespace ptrain
