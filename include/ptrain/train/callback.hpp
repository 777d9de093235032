#pragma once
// Callbacks: code the Trainer runs at named points of fit, as Lightning's Callback hooks. A callback
// is any class that names some of the points below; each point it names must be callable exactly as
// the Trainer calls it (checked where it is added: CallbackContract, with a sentence per broken
// rule), so a misspelt point does not compile into one that never runs. Several callbacks run in the
// order they were added (Trainer::add_callback).
//
//   points (each optional)                                   when
//   on_fit_start(TrainerView&)                               fit begins (after a resume's load)
//   on_train_epoch_start(TrainerView&, int epoch)            before an epoch's first batch (epoch from 1)
//   on_train_batch_start(TrainerView&, int64 batch)          before each batch (its index in the epoch)
//   on_before_optimizer_step(TrainerView&)                   gradients final (averaged, unscaled), the step
//                                                            about to be taken
//   on_step_end(TrainerView&, int64 step)                    after each optimizer step (global step count)
//   on_train_batch_end(TrainerView&, int64 batch, const EpochTotals&)  after each batch, with its sums
//   on_validation_start(TrainerView&)                        before a validation pass
//   on_validation_end(TrainerView&, const ValidationResult&) after it: every val_every_steps steps and at
//                                                            each epoch's end (with a validation loader)
//   on_train_epoch_end(TrainerView&, const EpochResult&)     after the epoch and its validation
//   on_fit_end(TrainerView&)                                 fit ends, stopped early or not
//   on_exception(TrainerView&, const std::exception&)        fit is leaving by an exception (rethrown after)
//   on_save_checkpoint(TrainerView&, const path&)            a checkpoint was published (every rank)
//   state() -> CallbackState, load_state(const CallbackState&)
//                                                            a stateful callback: its state goes into each
//                                                            checkpoint and comes back on resume
//
// Under mpiexec every rank runs every callback. A callback that writes files does so where
// view.is_main(); a decision that changes control flow goes through the view (request_stop), and
// the Trainer agrees it over the ranks at the next validation or epoch end: every rank stops at
// the same step, as one that stopped alone would hang the others' collectives.
#include <concepts>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/tasks/epoch_totals.hpp"
#include "ptrain/tasks/task.hpp"
#include "ptrain/train/checkpoint.hpp"
#include "ptrain/train/trainer_options.hpp"

namespace ptrain {

// A validation pass's result, as the callbacks and the logs see it.
struct ValidationResult {
  std::int64_t step = 0;   // the global step the weights are at
  int epoch = 0;           // the epoch it ran in, from 1
  bool epoch_end = false;  // at the epoch's end, or every TrainerOptions::val_every_steps steps
  double loss = 0;
  MetricValues metrics;
};

// A metric a callback watches, by the name the CSV log gives it: "val_loss", "val_<metric>" (of a
// ValidationResult or an EpochResult), "train_loss" or "train_<metric>" (of an EpochResult).
// Returns NaN where the result does not hold it (train_ metrics of a validation in mid-epoch).
inline bool monitors_validation(std::string_view monitor) { return monitor.rfind("val_", 0) == 0; }
inline void check_monitor_name(std::string_view who, std::string_view monitor) {
  check(monitors_validation(monitor) || monitor.rfind("train_", 0) == 0, who, ": monitor '", monitor,
        "': expected val_loss, train_loss, or val_/train_ and one of the task's metrics (val_accuracy)");
}
inline double monitored_value(const ValidationResult& r, std::string_view monitor) {
  if (!monitors_validation(monitor)) return std::nan("");
  const std::string_view name = monitor.substr(4);
  return name == "loss" ? r.loss : r.metrics.at(name);
}
inline double monitored_value(const EpochResult& r, std::string_view monitor) {
  const bool val = monitors_validation(monitor);
  const std::string_view name = monitor.substr(val ? 4 : 6);
  if (val && r.val.empty()) return std::nan("");
  if (name == "loss") return val ? r.val_loss : r.train_loss;
  return (val ? r.val : r.train).at(name);
}

// A stateful callback's state: scalars and tensors under its own names (the optimizers' format,
// so a checkpoint holds it as one more safetensors file).
using CallbackState = OptimizerState<double>;

// What a callback sees of the Trainer, without the Trainer's template arguments.
class TrainerView {
 public:
  virtual std::int64_t global_step() const = 0;
  virtual int epoch() const = 0;  // the epoch fit is in, from 1; 0 outside fit
  // Whether this rank writes files (rank 0 of the run; of the last pipeline stage where it logs).
  virtual bool is_main() = 0;
  virtual double lr() const = 0;
  // The optimizer's rate (its other groups scaled alike, as a schedule sets it).
  virtual void set_lr(double lr) = 0;
  // Asks fit to stop; every rank stops at the next validation or epoch end where any rank asked.
  virtual void request_stop(std::string reason) = 0;
  // The Trainer's checkpoints (train/checkpointing.hpp): configure them, save one now (every rank
  // calls it) with the value of CheckpointOptions::best_metric it is ranked by (NaN: unranked).
  virtual void configure_checkpoints(CheckpointOptions options) = 0;
  virtual std::filesystem::path save_checkpoint(double metric) = 0;

 protected:
  ~TrainerView() = default;
};

namespace detail::callback_probe {

// As the policies' probe (train/policy.hpp): &Probe<C>::name is ambiguous, ill-formed, exactly
// when C declares the name in any form.
struct EveryPointName {
  int on_fit_start, on_fit_end, on_train_epoch_start, on_train_epoch_end, on_train_batch_start, on_train_batch_end,
      on_before_optimizer_step, on_step_end, on_validation_start, on_validation_end, on_exception, on_save_checkpoint,
      state, load_state;
};
template <class C>
struct Probe : C, EveryPointName {};
template <class C>
concept Probeable = std::is_class_v<C> && !std::is_final_v<C>;

}  // namespace detail::callback_probe

#define PTRAIN_CALLBACK_NAMES(Concept, point) \
  template <class C>                          \
  concept Concept = detail::callback_probe::Probeable<C> && !requires { &detail::callback_probe::Probe<C>::point; }
PTRAIN_CALLBACK_NAMES(NamesOnFitStart, on_fit_start);
PTRAIN_CALLBACK_NAMES(NamesOnFitEnd, on_fit_end);
PTRAIN_CALLBACK_NAMES(NamesOnTrainEpochStart, on_train_epoch_start);
PTRAIN_CALLBACK_NAMES(NamesOnTrainEpochEnd, on_train_epoch_end);
PTRAIN_CALLBACK_NAMES(NamesOnTrainBatchStart, on_train_batch_start);
PTRAIN_CALLBACK_NAMES(NamesOnTrainBatchEnd, on_train_batch_end);
PTRAIN_CALLBACK_NAMES(NamesOnBeforeOptimizerStep, on_before_optimizer_step);
PTRAIN_CALLBACK_NAMES(NamesOnStepEnd, on_step_end);
PTRAIN_CALLBACK_NAMES(NamesOnValidationStart, on_validation_start);
PTRAIN_CALLBACK_NAMES(NamesOnValidationEnd, on_validation_end);
PTRAIN_CALLBACK_NAMES(NamesOnException, on_exception);
PTRAIN_CALLBACK_NAMES(NamesOnSaveCheckpoint, on_save_checkpoint);
PTRAIN_CALLBACK_NAMES(NamesState, state);
PTRAIN_CALLBACK_NAMES(NamesLoadState, load_state);
#undef PTRAIN_CALLBACK_NAMES

// Each point as the Trainer calls it.
template <class C>
concept OnFitStartPoint = requires(C& c, TrainerView& v) { c.on_fit_start(v); };
template <class C>
concept OnFitEndPoint = requires(C& c, TrainerView& v) { c.on_fit_end(v); };
template <class C>
concept OnTrainEpochStartPoint = requires(C& c, TrainerView& v, int epoch) { c.on_train_epoch_start(v, epoch); };
template <class C>
concept OnTrainEpochEndPoint = requires(C& c, TrainerView& v, const EpochResult& r) { c.on_train_epoch_end(v, r); };
template <class C>
concept OnTrainBatchStartPoint = requires(C& c, TrainerView& v, std::int64_t b) { c.on_train_batch_start(v, b); };
template <class C>
concept OnTrainBatchEndPoint = requires(C& c, TrainerView& v, std::int64_t b, const EpochTotals& t) {
  c.on_train_batch_end(v, b, t);
};
template <class C>
concept OnBeforeOptimizerStepPoint = requires(C& c, TrainerView& v) { c.on_before_optimizer_step(v); };
template <class C>
concept OnStepEndPoint = requires(C& c, TrainerView& v, std::int64_t step) { c.on_step_end(v, step); };
template <class C>
concept OnValidationStartPoint = requires(C& c, TrainerView& v) { c.on_validation_start(v); };
template <class C>
concept OnValidationEndPoint = requires(C& c, TrainerView& v, const ValidationResult& r) {
  c.on_validation_end(v, r);
};
template <class C>
concept OnExceptionPoint = requires(C& c, TrainerView& v, const std::exception& e) { c.on_exception(v, e); };
template <class C>
concept OnSaveCheckpointPoint = requires(C& c, TrainerView& v, const std::filesystem::path& p) {
  c.on_save_checkpoint(v, p);
};
template <class C>
concept StatePoints = requires(C& c, const C& k, const CallbackState& s) {
  { k.state() } -> std::convertible_to<CallbackState>;
  c.load_state(s);
};

template <class C>
concept NamesSomeCallbackPoint =
    NamesOnFitStart<C> || NamesOnFitEnd<C> || NamesOnTrainEpochStart<C> || NamesOnTrainEpochEnd<C> ||
    NamesOnTrainBatchStart<C> || NamesOnTrainBatchEnd<C> || NamesOnBeforeOptimizerStep<C> || NamesOnStepEnd<C> ||
    NamesOnValidationStart<C> || NamesOnValidationEnd<C> || NamesOnException<C> || NamesOnSaveCheckpoint<C> ||
    NamesState<C>;

// A type the Trainer takes as a callback. Says nothing about why not; CallbackContract does.
template <class C>
concept Callback =
    NamesSomeCallbackPoint<C> && (!NamesOnFitStart<C> || OnFitStartPoint<C>) && (!NamesOnFitEnd<C> || OnFitEndPoint<C>) &&
    (!NamesOnTrainEpochStart<C> || OnTrainEpochStartPoint<C>) && (!NamesOnTrainEpochEnd<C> || OnTrainEpochEndPoint<C>) &&
    (!NamesOnTrainBatchStart<C> || OnTrainBatchStartPoint<C>) && (!NamesOnTrainBatchEnd<C> || OnTrainBatchEndPoint<C>) &&
    (!NamesOnBeforeOptimizerStep<C> || OnBeforeOptimizerStepPoint<C>) && (!NamesOnStepEnd<C> || OnStepEndPoint<C>) &&
    (!NamesOnValidationStart<C> || OnValidationStartPoint<C>) &&
    (!NamesOnValidationEnd<C> || OnValidationEndPoint<C>) && (!NamesOnException<C> || OnExceptionPoint<C>) &&
    (!NamesOnSaveCheckpoint<C> || OnSaveCheckpointPoint<C>) && (NamesState<C> == NamesLoadState<C>) &&
    (!NamesState<C> || StatePoints<C>);

// Trainer::add_callback instantiates this: one sentence per broken rule, and the compiler's
// "in instantiation of CallbackContract<C>" names the callback.
template <class C>
struct CallbackContract {
  static_assert(detail::callback_probe::Probeable<C>,
                "Trainer callback: a callback must be a class type that is not final (its points are detected by "
                "deriving from it); see ptrain/train/callback.hpp");
  static_assert(NamesSomeCallbackPoint<C>,
                "Trainer callback: this type names none of the callback points (on_fit_start, on_train_batch_end, "
                "on_validation_end, ...; see ptrain/train/callback.hpp)");
  static_assert(!NamesOnFitStart<C> || OnFitStartPoint<C>, "Trainer callback: on_fit_start must be callable as on_fit_start(TrainerView&)");
  static_assert(!NamesOnFitEnd<C> || OnFitEndPoint<C>, "Trainer callback: on_fit_end must be callable as on_fit_end(TrainerView&)");
  static_assert(!NamesOnTrainEpochStart<C> || OnTrainEpochStartPoint<C>,
                "Trainer callback: on_train_epoch_start must be callable as on_train_epoch_start(TrainerView&, int epoch)");
  static_assert(!NamesOnTrainEpochEnd<C> || OnTrainEpochEndPoint<C>,
                "Trainer callback: on_train_epoch_end must be callable as on_train_epoch_end(TrainerView&, const "
                "EpochResult&)");
  static_assert(!NamesOnTrainBatchStart<C> || OnTrainBatchStartPoint<C>,
                "Trainer callback: on_train_batch_start must be callable as on_train_batch_start(TrainerView&, "
                "std::int64_t batch)");
  static_assert(!NamesOnTrainBatchEnd<C> || OnTrainBatchEndPoint<C>,
                "Trainer callback: on_train_batch_end must be callable as on_train_batch_end(TrainerView&, "
                "std::int64_t batch, const EpochTotals&)");
  static_assert(!NamesOnBeforeOptimizerStep<C> || OnBeforeOptimizerStepPoint<C>,
                "Trainer callback: on_before_optimizer_step must be callable as on_before_optimizer_step(TrainerView&)");
  static_assert(!NamesOnStepEnd<C> || OnStepEndPoint<C>,
                "Trainer callback: on_step_end must be callable as on_step_end(TrainerView&, std::int64_t step)");
  static_assert(!NamesOnValidationStart<C> || OnValidationStartPoint<C>,
                "Trainer callback: on_validation_start must be callable as on_validation_start(TrainerView&)");
  static_assert(!NamesOnValidationEnd<C> || OnValidationEndPoint<C>,
                "Trainer callback: on_validation_end must be callable as on_validation_end(TrainerView&, const "
                "ValidationResult&)");
  static_assert(!NamesOnException<C> || OnExceptionPoint<C>,
                "Trainer callback: on_exception must be callable as on_exception(TrainerView&, const std::exception&)");
  static_assert(!NamesOnSaveCheckpoint<C> || OnSaveCheckpointPoint<C>,
                "Trainer callback: on_save_checkpoint must be callable as on_save_checkpoint(TrainerView&, const "
                "std::filesystem::path&)");
  static_assert(NamesState<C> == NamesLoadState<C>,
                "Trainer callback: a stateful callback names both state() and load_state(const CallbackState&)");
  static_assert(!NamesState<C> || StatePoints<C>,
                "Trainer callback: state() must be const and return a CallbackState, load_state take a const "
                "CallbackState&");
  static constexpr bool satisfied = Callback<C>;
};

// Every point, each as the contract asks: what the contract is checked against.
struct CallbackArchetype {
  void on_fit_start(TrainerView&) {}
  void on_fit_end(TrainerView&) {}
  void on_train_epoch_start(TrainerView&, int) {}
  void on_train_epoch_end(TrainerView&, const EpochResult&) {}
  void on_train_batch_start(TrainerView&, std::int64_t) {}
  void on_train_batch_end(TrainerView&, std::int64_t, const EpochTotals&) {}
  void on_before_optimizer_step(TrainerView&) {}
  void on_step_end(TrainerView&, std::int64_t) {}
  void on_validation_start(TrainerView&) {}
  void on_validation_end(TrainerView&, const ValidationResult&) {}
  void on_exception(TrainerView&, const std::exception&) {}
  void on_save_checkpoint(TrainerView&, const std::filesystem::path&) {}
  CallbackState state() const { return {}; }
  void load_state(const CallbackState&) {}
};
static_assert(Callback<CallbackArchetype>);

namespace detail {

// The Trainer's callbacks, in the order added, their types erased; each point runs on all of them.
class CallbackList {
 public:
  template <class C>
  void add(std::shared_ptr<C> callback) {
    static_assert(CallbackContract<C>::satisfied, "Trainer::add_callback: see the sentence above");
    check(callback != nullptr, "Trainer::add_callback: a null callback");
    callbacks_.push_back(std::make_unique<Erased<C>>(std::move(callback)));
  }
  bool empty() const { return callbacks_.empty(); }

  void fit_start(TrainerView& v) { each([&](Any& c) { c.on_fit_start(v); }); }
  void fit_end(TrainerView& v) { each([&](Any& c) { c.on_fit_end(v); }); }
  void train_epoch_start(TrainerView& v, int epoch) { each([&](Any& c) { c.on_train_epoch_start(v, epoch); }); }
  void train_epoch_end(TrainerView& v, const EpochResult& r) { each([&](Any& c) { c.on_train_epoch_end(v, r); }); }
  void train_batch_start(TrainerView& v, std::int64_t b) { each([&](Any& c) { c.on_train_batch_start(v, b); }); }
  void train_batch_end(TrainerView& v, std::int64_t b, const EpochTotals& t) {
    each([&](Any& c) { c.on_train_batch_end(v, b, t); });
  }
  void before_optimizer_step(TrainerView& v) { each([&](Any& c) { c.on_before_optimizer_step(v); }); }
  void step_end(TrainerView& v, std::int64_t step) { each([&](Any& c) { c.on_step_end(v, step); }); }
  void validation_start(TrainerView& v) { each([&](Any& c) { c.on_validation_start(v); }); }
  void validation_end(TrainerView& v, const ValidationResult& r) { each([&](Any& c) { c.on_validation_end(v, r); }); }
  void exception(TrainerView& v, const std::exception& e) { each([&](Any& c) { c.on_exception(v, e); }); }
  void save_checkpoint(TrainerView& v, const std::filesystem::path& p) {
    each([&](Any& c) { c.on_save_checkpoint(v, p); });
  }

  // Every stateful callback's state in one, each under "callback.<i>." (i: its place among the
  // stateful ones); nothing when none has state.
  std::optional<CallbackState> state() const;
  // The inverse of state(); file names the checkpoint's file in an error.
  void load_state(CallbackState all, const std::string& file);
  bool stateful() const {
    for (const auto& c : callbacks_)
      if (c->stateful()) return true;
    return false;
  }

 private:
  struct Any {
    virtual ~Any() = default;
    virtual void on_fit_start(TrainerView&) = 0;
    virtual void on_fit_end(TrainerView&) = 0;
    virtual void on_train_epoch_start(TrainerView&, int) = 0;
    virtual void on_train_epoch_end(TrainerView&, const EpochResult&) = 0;
    virtual void on_train_batch_start(TrainerView&, std::int64_t) = 0;
    virtual void on_train_batch_end(TrainerView&, std::int64_t, const EpochTotals&) = 0;
    virtual void on_before_optimizer_step(TrainerView&) = 0;
    virtual void on_step_end(TrainerView&, std::int64_t) = 0;
    virtual void on_validation_start(TrainerView&) = 0;
    virtual void on_validation_end(TrainerView&, const ValidationResult&) = 0;
    virtual void on_exception(TrainerView&, const std::exception&) = 0;
    virtual void on_save_checkpoint(TrainerView&, const std::filesystem::path&) = 0;
    virtual bool stateful() const = 0;
    virtual CallbackState state() const = 0;
    virtual void load_state(const CallbackState&) = 0;
  };
  template <class C>
  struct Erased final : Any {
    explicit Erased(std::shared_ptr<C> c) : c(std::move(c)) {}
    void on_fit_start(TrainerView& v) override {
      if constexpr (NamesOnFitStart<C>) c->on_fit_start(v);
    }
    void on_fit_end(TrainerView& v) override {
      if constexpr (NamesOnFitEnd<C>) c->on_fit_end(v);
    }
    void on_train_epoch_start(TrainerView& v, int epoch) override {
      if constexpr (NamesOnTrainEpochStart<C>) c->on_train_epoch_start(v, epoch);
    }
    void on_train_epoch_end(TrainerView& v, const EpochResult& r) override {
      if constexpr (NamesOnTrainEpochEnd<C>) c->on_train_epoch_end(v, r);
    }
    void on_train_batch_start(TrainerView& v, std::int64_t b) override {
      if constexpr (NamesOnTrainBatchStart<C>) c->on_train_batch_start(v, b);
    }
    void on_train_batch_end(TrainerView& v, std::int64_t b, const EpochTotals& t) override {
      if constexpr (NamesOnTrainBatchEnd<C>) c->on_train_batch_end(v, b, t);
    }
    void on_before_optimizer_step(TrainerView& v) override {
      if constexpr (NamesOnBeforeOptimizerStep<C>) c->on_before_optimizer_step(v);
    }
    void on_step_end(TrainerView& v, std::int64_t step) override {
      if constexpr (NamesOnStepEnd<C>) c->on_step_end(v, step);
    }
    void on_validation_start(TrainerView& v) override {
      if constexpr (NamesOnValidationStart<C>) c->on_validation_start(v);
    }
    void on_validation_end(TrainerView& v, const ValidationResult& r) override {
      if constexpr (NamesOnValidationEnd<C>) c->on_validation_end(v, r);
    }
    void on_exception(TrainerView& v, const std::exception& e) override {
      if constexpr (NamesOnException<C>) c->on_exception(v, e);
    }
    void on_save_checkpoint(TrainerView& v, const std::filesystem::path& p) override {
      if constexpr (NamesOnSaveCheckpoint<C>) c->on_save_checkpoint(v, p);
    }
    bool stateful() const override { return NamesState<C>; }
    CallbackState state() const override {
      if constexpr (NamesState<C>) return c->state();
      else return {};
    }
    void load_state(const CallbackState& s) override {
      if constexpr (NamesLoadState<C>) c->load_state(s);
    }
    std::shared_ptr<C> c;
  };

  template <class F>
  void each(const F& f) {
    for (auto& c : callbacks_) f(*c);
  }

  std::vector<std::unique_ptr<Any>> callbacks_;
};

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE std::optional<CallbackState> CallbackList::state() const {
  CallbackState all;
  bool any = false;
  int index = 0;
  for (const auto& c : callbacks_) {
    if (!c->stateful()) continue;
    any = true;
    const std::string prefix = "callback." + std::to_string(index++) + ".";
    CallbackState own = c->state();
    for (auto& [name, value] : own.scalars) all.scalars.emplace_back(prefix + name, value);
    for (auto& [name, tensor] : own.tensors) all.tensors.emplace_back(prefix + name, std::move(tensor));
    all.scalars.emplace_back(prefix.substr(0, prefix.size() - 1), 1.0);  // present, even with an empty state
  }
  if (!any) return std::nullopt;
  return all;
}

PTRAIN_PREBUILT_INLINE void CallbackList::load_state(CallbackState all, const std::string& file) {
  int index = 0;
  for (const auto& c : callbacks_) {
    if (!c->stateful()) continue;
    const std::string prefix = "callback." + std::to_string(index++) + ".";
    const std::string marker = prefix.substr(0, prefix.size() - 1);
    bool present = false;
    CallbackState own;
    for (auto& [name, value] : all.scalars) {
      if (name == marker) present = true;
      else if (name.rfind(prefix, 0) == 0) own.scalars.emplace_back(name.substr(prefix.size()), value);
    }
    for (auto& [name, tensor] : all.tensors)
      if (name.rfind(prefix, 0) == 0) own.tensors.emplace_back(name.substr(prefix.size()), std::move(tensor));
    check(present, file, ": the checkpoint holds the state of ", index - 1,
          " stateful callback(s); this Trainer has more (add the same callbacks, in the same order, as the run "
          "that saved it)");
    c->load_state(own);
  }
}
#endif

}  // namespace detail
}  // namespace ptrain
