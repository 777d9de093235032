#pragma once
// Monitor: the metric a callback watches (EarlyStopping, ReduceLROnPlateau, ModelCheckpoint) and
// what counts as better: lower or higher by more than min_delta. The value comes from the
// validation when the name is val_<...>, from the epoch's training sums when it is train_<...>
// (train/callback.hpp's monitored_value).
#include <cmath>
#include <string>

#include "ptrain/train/callback.hpp"
#include "ptrain/train/checkpoint.hpp"

namespace ptrain {

struct Monitor {
  std::string name = "val_loss";
  BestIs mode = BestIs::lower;
  double min_delta = 0;  // an improvement is a change by more than this (absolute, >= 0)

  void check_valid(const char* who) const {
    check_monitor_name(who, name);
    check(min_delta >= 0 && std::isfinite(min_delta), who, ": min_delta ", min_delta, " (expected a finite value >= 0)");
  }
  // Whether value improves on best (NaN: nothing yet, any finite value does).
  bool improves(double value, double best) const {
    if (std::isnan(best)) return std::isfinite(value);
    return mode == BestIs::lower ? value < best - min_delta : value > best + min_delta;
  }
  // Whether the callback acts at a validation's end (val_ metrics) or at the training epoch's end.
  bool on_validation() const { return monitors_validation(name); }
  // At an epoch's end: a val_ metric in a fit without validation is refused, not ignored.
  void check_measured(const char* who, const EpochResult& r) const {
    check(!on_validation() || !r.val.empty(), who, ": monitor '", name,
          "' needs a validation loader in fit (or monitor a train_ metric)");
  }
};

// The points of a callback that acts on each value of its monitor (EarlyStopping,
// ReduceLROnPlateau): Derived has monitor() and observe(view, value); observe runs at each
// validation for a val_ metric, at each epoch's end for a train_ one.
template <class Derived>
class ObservesMonitor {
 public:
  void on_validation_end(TrainerView& view, const ValidationResult& r) {
    const Monitor& m = derived().monitor();
    if (m.on_validation()) derived().observe(view, monitored_value(r, m.name));
  }
  void on_train_epoch_end(TrainerView& view, const EpochResult& r) {
    const Monitor& m = derived().monitor();
    m.check_measured(Derived::callback_name, r);
    if (!m.on_validation()) derived().observe(view, monitored_value(r, m.name));
  }

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }
};

}  // namespace ptrain
