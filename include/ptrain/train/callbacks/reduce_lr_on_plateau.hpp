#pragma once
// ReduceLROnPlateau: multiplies the learning rate by `factor` when the monitored metric has not
// improved for more than `patience` checks, as torch.optim.lr_scheduler.ReduceLROnPlateau (its
// threshold as Monitor::min_delta, absolute; cooldown; min_lr). A check is each validation for a
// val_ metric, each epoch for a train_ one. The rate is the optimizer's (its groups scaled alike)
// and comes back from a checkpoint with the optimizer; the callback's counters with its state.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/train/callback.hpp"
#include "ptrain/train/callbacks/monitor.hpp"

namespace ptrain {

struct ReduceLROnPlateauOptions {
  Monitor monitor;
  double factor = 0.1;  // in (0, 1)
  int patience = 10;    // checks without improvement tolerated; the next one reduces
  int cooldown = 0;     // checks after a reduction during which none is counted
  double min_lr = 0;
};

class ReduceLROnPlateau : public ObservesMonitor<ReduceLROnPlateau> {
 public:
  static constexpr const char* callback_name = "ReduceLROnPlateau";

  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options) : options_(std::move(options)) {
    options_.monitor.check_valid("ReduceLROnPlateau");
    check(options_.factor > 0 && options_.factor < 1, "ReduceLROnPlateau: factor ", options_.factor,
          " (expected between 0 and 1)");
    check(options_.patience >= 0 && options_.cooldown >= 0 && options_.min_lr >= 0,
          "ReduceLROnPlateau: patience, cooldown and min_lr must be >= 0");
  }

  const Monitor& monitor() const { return options_.monitor; }

  int reductions() const { return reductions_; }

  CallbackState state() const {
    return {{{"best", best_}, {"bad", double(bad_)}, {"cooldown", double(cooldown_left_)},
             {"reductions", double(reductions_)}},
            {}};
  }
  void load_state(const CallbackState& s) {
    for (const auto& [name, value] : s.scalars) {
      if (name == "best") best_ = value;
      if (name == "bad") bad_ = static_cast<int>(value);
      if (name == "cooldown") cooldown_left_ = static_cast<int>(value);
      if (name == "reductions") reductions_ = static_cast<int>(value);
    }
  }

 private:
  friend ObservesMonitor<ReduceLROnPlateau>;
  void observe(TrainerView& view, double value) {
    if (options_.monitor.improves(value, best_)) {
      best_ = value;
      bad_ = 0;
    } else {
      ++bad_;
    }
    if (cooldown_left_ > 0) {
      --cooldown_left_;
      bad_ = 0;
    }
    if (bad_ <= options_.patience) return;
    const double old_lr = view.lr(), new_lr = std::max(old_lr * options_.factor, options_.min_lr);
    bad_ = 0;
    cooldown_left_ = options_.cooldown;
    if (old_lr - new_lr <= 1e-8 * old_lr) return;  // at min_lr already
    view.set_lr(new_lr);
    ++reductions_;
    if (view.is_main())
      log_line("ReduceLROnPlateau: " + options_.monitor.name + " has not improved on " + checkpoint::exact(best_) +
               ": learning rate " + checkpoint::exact(old_lr) + " -> " + checkpoint::exact(new_lr));
  }

  ReduceLROnPlateauOptions options_;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int bad_ = 0, cooldown_left_ = 0, reductions_ = 0;
};

}  // namespace ptrain
