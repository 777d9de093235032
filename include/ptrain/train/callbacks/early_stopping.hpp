#pragma once
// EarlyStopping: stops fit when the monitored metric has not improved for `patience` checks in a
// row (Lightning's EarlyStopping(monitor, mode, patience, min_delta); a check is each validation for
// a val_ metric, each epoch for a train_ one). A value that is not finite stops at once
// (Lightning's check_finite). Every rank sees the same reduced metric; the Trainer still agrees the
// stop over the ranks. Its state (best, checks without improvement) is saved in checkpoints.
//   trainer.add_callback(EarlyStopping({.monitor = {.name = "val_accuracy", .mode = BestIs::higher}, .patience = 3}));
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/train/callback.hpp"
#include "ptrain/train/callbacks/monitor.hpp"

namespace ptrain {

struct EarlyStoppingOptions {
  Monitor monitor;
  int patience = 3;  // checks without improvement before stopping (>= 1)
};

class EarlyStopping : public ObservesMonitor<EarlyStopping> {
 public:
  static constexpr const char* callback_name = "EarlyStopping";

  explicit EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)) {
    options_.monitor.check_valid("EarlyStopping");
    check(options_.patience >= 1, "EarlyStopping: patience ", options_.patience, " (expected at least 1)");
  }

  const Monitor& monitor() const { return options_.monitor; }

  double best() const { return best_; }
  int checks_without_improvement() const { return waited_; }
  // The global step it asked to stop at; -1 while it has not.
  std::int64_t stopped_step() const { return stopped_step_; }

  CallbackState state() const {
    return {{{"best", best_}, {"waited", double(waited_)}, {"stopped_step", double(stopped_step_)}}, {}};
  }
  void load_state(const CallbackState& s) {
    for (const auto& [name, value] : s.scalars) {
      if (name == "best") best_ = value;
      if (name == "waited") waited_ = static_cast<int>(value);
      if (name == "stopped_step") stopped_step_ = static_cast<std::int64_t>(value);
    }
  }

 private:
  friend ObservesMonitor<EarlyStopping>;
  void observe(TrainerView& view, double value) {
    std::string reason;
    if (!std::isfinite(value)) {
      reason = options_.monitor.name + " is " + checkpoint::exact(value) + ", not finite";
    } else if (options_.monitor.improves(value, best_)) {
      best_ = value;
      waited_ = 0;
      return;
    } else if (++waited_ >= options_.patience) {
      reason = options_.monitor.name + " has not improved on " + checkpoint::exact(best_) + " by more than " +
               checkpoint::exact(options_.monitor.min_delta) + " for " + std::to_string(waited_) + " check(s)";
    } else {
      return;
    }
    stopped_step_ = view.global_step();
    view.request_stop("EarlyStopping: " + reason);
  }

  EarlyStoppingOptions options_;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int waited_ = 0;
  std::int64_t stopped_step_ = -1;
};

}  // namespace ptrain
