#pragma once
// Trainer<Model, Policies...>: the training loop, a front over parts that each hold one idea: the
// policies and the order of their points (train/policy_set.hpp; the contract: train/policy.hpp,
// docs/policies.md), checkpoints (train/checkpointing.hpp), the task's loss and metrics
// (tasks/task.hpp: a Task among the Trainer's types, Classification{} when there is none), what fit
// needs of a loader (train/loader.hpp), the logs (train/detail/run_logs.hpp), and the callbacks
// run at the points of fit (train/callback.hpp; built in: train/callbacks/).
//   Trainer<Net, DataParallel<MpiAllreduce>, Segmentation> t(model, adam, {}, dp, Segmentation{.classes = 3});
// Forward, backward and the optimizer run on the model's device; each batch goes over once
// (BatchUpload) and only the loss and the metric sums come back.
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/timeline.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/loader.hpp"
#include "ptrain/launch/process_info.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/optim/adam.hpp"
#include "ptrain/optim/sgd.hpp"
#include "ptrain/parallel/loss_scaler.hpp"
#include "ptrain/tasks/epoch_totals.hpp"
#include "ptrain/tasks/task.hpp"
#include "ptrain/train/callback.hpp"
#include "ptrain/train/checkpointing.hpp"
#include "ptrain/train/detail/optimizer_handle.hpp"
#include "ptrain/train/detail/rank_timelines.hpp"
#include "ptrain/train/detail/run_logs.hpp"
#include "ptrain/train/loader.hpp"
#include "ptrain/train/non_finite.hpp"
#include "ptrain/train/policy_set.hpp"
#include "ptrain/train/progress.hpp"
#include "ptrain/train/trainer_options.hpp"

namespace ptrain {

template <class Model, class... Policies>
class Trainer {
 public:
  using T = typename Model::scalar_type;
  using D = typename Model::device_type;
  using Set = PolicySet<Model, Policies...>;
  using TaskType = typename Set::TaskType;
  using target_type = typename TaskType::target_type;
  static_assert(std::derived_from<Model, Module<T, D>>,
                "Trainer<Model>: Model must derive from ptrain::Module<T, D> (see docs/architecture.md)");
  static_assert(TaskContract<TaskType, T, D>::satisfied,
                "Trainer: the task does not satisfy ptrain::Task for the model's scalar type and device (the "
                "sentence above says which member); see ptrain/tasks/task.hpp");

  // Options default only without policies: nvcc refuses a default argument before a pack.
  template <class Opt>
  Trainer(std::shared_ptr<Model> model, std::shared_ptr<Opt> optimizer)
      : Trainer(std::move(model), std::move(optimizer), TrainerOptions{}) {}
  template <class Opt>
  Trainer(std::shared_ptr<Model> model, std::shared_ptr<Opt> optimizer, TrainerOptions options, Policies... policies);

  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
  Model& model() { return *model_; }
  // The layers this rank runs: the whole model, or its pipeline stage.
  Module<T, D>& local_model() { return *local_; }
  template <class P>
  P& policy() { return policies_.template get<P>(); }
  const TaskType& task() const { return task_; }
  MetricValues metrics(const EpochTotals& totals) const { return metric_values(task_, totals); }
  std::int64_t global_step() const { return step_; }
  // Optimizer steps skipped for an inf or NaN loss or gradient (with terminate_on_nan false).
  std::int64_t skipped_steps() const { return skipped_steps_; }
  // The global gradient norm of the last step clipped (TrainerOptions::clip_grad_norm), before
  // clipping; NaN before the first.
  double last_gradient_norm() const { return last_gradient_norm_; }
  bool is_main() { return policies_.is_main(); }

  // The optimizer's learning rate (group 0's); set_lr sets it as a schedule does (train/callback.hpp).
  double lr() const { return optimizer_.lr(); }
  void set_lr(double lr) { optimizer_.set_lr(lr); }
  // The optimizer's state as it is now (moments, rates), put back by calling what this returns (the
  // learning-rate finder's undo, train/lr_finder.hpp).
  std::function<void()> remember_optimizer() {
    check(bool(optimizer_.remember), "Trainer::remember_optimizer: the optimizer has no state()/load_state()");
    return optimizer_.remember();
  }
  // f(model) with every parameter whole on this rank (Sharded<Zero3> gathers them, and lets them
  // go after): a summary or an export of the whole model. Every rank calls it.
  template <class F>
  void with_whole_model(F&& f) {
    policies_.gather_parameters();
    f(*model_);
    policies_.shard_parameters();
  }

  // A callback (train/callback.hpp: EarlyStopping, ModelCheckpoint, WeightEma, ... or any type with
  // some of its points), run after those added before it. Every rank adds the same callbacks.
  template <class C>
  std::shared_ptr<C> add_callback(std::shared_ptr<C> callback) {
    callbacks_.add(callback);
    return callback;
  }
  template <class C>
  std::shared_ptr<C> add_callback(C callback) {
    return add_callback(std::make_shared<C>(std::move(callback)));
  }
  // What the callbacks see of this Trainer (to drive one by hand in a test).
  TrainerView& view() { return view_; }
  // Whether the last fit ended early because a callback asked (every rank stopped at the same
  // step), and what the asking callback said.
  bool stopped_early() const { return stopped_early_; }
  const std::string& stop_reason() const { return stop_reason_; }

  // Called after every optimizer step with the global step count (learning-rate schedules).
  void on_step_end(std::function<void(std::int64_t step)> callback) { step_callbacks_.push_back(std::move(callback)); }
  // Called after every epoch with its result.
  void on_epoch_end(std::function<void(const EpochResult&)> callback) { epoch_callbacks_.push_back(std::move(callback)); }

  // One batch: forward and backward, and an optimizer step once accumulation_steps batches have
  // added their gradients. Returns this batch's sums (loss, samples, the task's metric state).
  EpochTotals train_step(const Tensor<T>& inputs, const target_type& targets);

  template <class L>
  EpochTotals train_epoch(L& loader, int epoch);

  // max_batches > 0: the loader's first max_batches batches only.
  template <class L>
  EpochTotals evaluate(L& loader, std::int64_t max_batches = 0);

  // Trains for epochs, evaluating on val (when given) after each and every
  // TrainerOptions::val_every_steps steps; prints one line per epoch. Returns early, with
  // stopped_early(), when a callback asks to stop.
  template <class TrainLoader, class ValLoader>
  std::vector<EpochResult> fit(TrainLoader& train, ValLoader* val, int epochs);
  template <class TrainLoader>
  std::vector<EpochResult> fit(TrainLoader& train, int epochs) {
    return fit(train, static_cast<TrainLoader*>(nullptr), epochs);
  }

  // ---- Checkpoints (train/checkpointing.hpp): every N steps and epochs, and on SIGTERM or SIGUSR1
  // (then fit returns early, preempted()), in a directory every rank sees ----
  void save_checkpoints(CheckpointOptions options) { checkpoints_.configure(std::move(options)); }
  // A learning-rate Scheduler (optim/scheduler.hpp) whose step count is saved and restored.
  template <class S>
  void checkpoint_scheduler(S& scheduler) {
    checkpoints_.track_scheduler(scheduler);
  }
  // Whether the last fit stopped early for a preemption signal (after saving a checkpoint).
  bool preempted() const { return checkpoints_.preempted(); }
  // Loads <dir>/step-N: weights, optimizer, policies, scheduler, RNG, where fit continues.
  void load_checkpoint(const std::filesystem::path& directory);
  // The newest checkpoint under directory, loaded; false when there is none (a first run).
  bool resume_latest(const std::filesystem::path& directory) {
    const auto latest = checkpoint::latest(directory);
    if (latest) load_checkpoint(*latest);
    return latest.has_value();
  }

 private:
  template <class Batch>
  target_type batch_targets(const Batch& batch) const {
    if constexpr (requires { task_.batch_targets(batch); }) return task_.batch_targets(batch);
    else return batch.targets;
  }

  // Whether the step's loss and gradients are finite; when not, an Error (terminate_on_nan) or a
  // skipped step, said and counted unless a policy already skipped it.
  bool finite_step(bool skipped_by_policy);
  // None where this rank computes no loss (a pipeline stage before the last).
  std::optional<double> step_loss() const {
    return step_loss_weight_ > 0 ? std::optional<double>(step_loss_sum_) : std::nullopt;
  }
  StepPlace step_place() const { return {step_ + 1, epoch_, batch_in_epoch_, detect_process_info().rank}; }

  bool writes_tensorboard() const { return logs_ && logs_->writes_tensorboard(); }

  // A validation pass inside fit, with the callbacks around it; one inside an epoch is logged
  // here, one at an epoch's end with the epoch.
  template <class L>
  ValidationResult validate(L& loader, bool epoch_end);

  // Whether any rank's callback asked to stop; every rank calls it at the same points of fit.
  bool stop_agreed();

  // What the callbacks see: this Trainer, behind TrainerView's untemplated face.
  class View final : public TrainerView {
   public:
    explicit View(Trainer& trainer) : t_(trainer) {}
    std::int64_t global_step() const override { return t_.step_; }
    int epoch() const override { return t_.fit_epoch_; }
    bool is_main() override { return t_.is_main(); }
    double lr() const override { return t_.optimizer_.lr(); }
    void set_lr(double lr) override { t_.optimizer_.set_lr(lr); }
    void request_stop(std::string reason) override {
      if (!t_.stop_requested_) t_.stop_reason_ = std::move(reason);
      t_.stop_requested_ = true;
    }
    void configure_checkpoints(CheckpointOptions options) override { t_.checkpoints_.configure(std::move(options)); }
    // Where fit stands: the epochs done and the batches of the next, as a checkpoint resumes them.
    std::filesystem::path save_checkpoint(double metric) override {
      const auto& at = t_.position_;
      return t_.checkpoints_.save(t_.step_, at.epoch, at.batch, at.totals ? *at.totals : EpochTotals{}, metric);
    }

   private:
    Trainer& t_;
  };

  // loss_scale: 1/k under gradient accumulation, so k batches add up to their mean's gradient, times
  // the policies' loss scales (applied in float to the loss's gradient: fp16 cannot hold 65536).
  template <class BeforeBackward>
  EpochTotals forward_backward(const Tensor<T>& inputs, const target_type& targets, double loss_scale,
                               const BeforeBackward& before_backward);

  EpochTotals evaluate_batch(const Tensor<T>& inputs, const target_type& targets);

  void reduce(EpochTotals& totals);

  std::shared_ptr<Model> model_;
  TrainerOptions options_;
  Set policies_;
  TaskType task_;
  Module<T, D>* local_;
  Checkpointing<Model, Set> checkpoints_;
  detail::OptimizerHandle optimizer_;
  BatchUpload<D> upload_;
  std::optional<detail::RunLogs> logs_;  // on the main rank
  std::unique_ptr<Timeline> timeline_;
  std::vector<TimelineEvent> timeline_events_;  // every rank's, on the main rank
  std::chrono::steady_clock::time_point step_start_;
  double step_samples_ = 0;
  double last_gradient_norm_ = std::nan("");
  std::vector<std::function<void(std::int64_t)>> step_callbacks_;
  std::vector<std::function<void(const EpochResult&)>> epoch_callbacks_;
  detail::CallbackList callbacks_;
  View view_{*this};
  std::function<void()> mid_epoch_validation_;  // fit's, with a validation loader
  std::optional<ValidationResult> last_validation_;
  bool stop_requested_ = false, stopped_early_ = false;
  std::string stop_reason_;
  // Where fit stands, as a checkpoint saved now records it: epochs done, batches of the next done,
  // and their sums on this rank.
  struct Position {
    std::int64_t epoch = 0, batch = 0;
    const EpochTotals* totals = nullptr;
  } position_;
  int fit_epoch_ = 0;  // the epoch fit is in, from 1; 0 outside fit
  std::int64_t step_ = 0;
  int micro_step_ = 0;
  std::int64_t skipped_steps_ = 0;
  double step_loss_sum_ = 0;       // the losses of this step's batches (several under accumulation)
  double step_loss_weight_ = 0;    // and their weights: 0 on a pipeline stage before the last
  int epoch_ = 0;                  // from 1 inside train_epoch, 0 outside it
  std::int64_t batch_in_epoch_ = 0;
};

// The members above not defined in the class: out of it, so that a program built against the
// prebuilt library, which compiles Trainer<Module<T, Cpu>> (below), does not compile them again.
template <class Model, class... Policies>
template <class Opt>
Trainer<Model, Policies...>::Trainer(std::shared_ptr<Model> model, std::shared_ptr<Opt> optimizer, TrainerOptions options,
                                     Policies... policies)
    : model_((check(model != nullptr && optimizer != nullptr, "Trainer: null model or optimizer"), std::move(model))),
      options_(std::move(options)),
      policies_(std::move(policies)...),
      task_(policies_.task()),
      local_(&policies_.lay_out(*model_)),
      checkpoints_(*model_, *local_, policies_),
      optimizer_(detail::OptimizerHandle::of(optimizer, policies_)) {
  check_trainer_options(options_);
  check(options_.clip_grad_norm == 0 || bool(optimizer_.clip),
        "Trainer: clip_grad_norm needs an optimizer whose params() gives the parameters it steps (as Sgd and Adam do)");
  checkpoints_.track_optimizer(optimizer);
  checkpoints_.track_callbacks(callbacks_, [this](const std::filesystem::path& saved) {
    callbacks_.save_checkpoint(view_, saved);
  });
  policies_.offer_optimizer_parameters(*optimizer);
  if (is_main()) logs_.emplace(options_, task_.metric_names());
  if (!options_.timeline.empty()) timeline_ = std::make_unique<Timeline>();
}

template <class Model, class... Policies>
EpochTotals Trainer<Model, Policies...>::train_step(const Tensor<T>& inputs, const target_type& targets) {
  if (micro_step_ == 0) {
    model_->zero_grad();
    step_start_ = std::chrono::steady_clock::now();
    step_samples_ = 0;
  }
  const int k = options_.accumulation_steps;
  const bool ends_in_step = ++micro_step_ == k;
  const auto before_backward = [&](bool last_backward_of_batch) {
    policies_.before_backward(*local_, ends_in_step && last_backward_of_batch);
  };
  EpochTotals batch = forward_backward(inputs, targets, policies_.loss_scale() / k, before_backward);
  ++batch_in_epoch_;
  step_loss_sum_ += batch.loss_sum;
  step_loss_weight_ += batch.loss_weight;
  step_samples_ += batch.samples;
  if (!ends_in_step) return batch;
  micro_step_ = 0;
  const double step_loss_scale = writes_tensorboard() ? policies_.loss_scale() : 1.0;  // the scale this step used
  const std::optional<double> loss =
      step_loss_weight_ > 0 ? std::optional<double>(step_loss_sum_ / step_loss_weight_) : std::nullopt;
  bool proceed = policies_.before_optimizer_step(*local_, active_timeline());
  // A policy's skip (an fp16 overflow) is normal while the loss is finite; a non-finite loss is
  // not, and no loss scale mends it.
  if (proceed || !std::isfinite(step_loss_sum_)) proceed = finite_step(!proceed) && proceed;
  proceed = policies_.steps_together(proceed);
  try {
    policies_.step_decided(proceed);
  } catch (const LossScaleUnderflow& e) {
    fail("Trainer: ", non_finite_step_text(step_loss(), first_non_finite_gradient(*local_), step_place()), ". ",
         e.what());
  }
  step_loss_sum_ = step_loss_weight_ = 0;
  if (proceed) {
    callbacks_.before_optimizer_step(view_);
    NoGradGuard no_grad;
    const TimelineSpan span(active_timeline(), SpanKind::optimizer);
    if (options_.clip_grad_norm > 0) last_gradient_norm_ = optimizer_.clip(options_.clip_grad_norm);
    optimizer_.step();
  }
  policies_.after_optimizer_step(*local_);
  ++step_;
  if (writes_tensorboard()) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
    logs_->step(step_, loss, optimizer_.lr(), step_loss_scale, step_samples_, seconds);
  }
  for (auto& callback : step_callbacks_) callback(step_);
  callbacks_.step_end(view_, step_);
  return batch;
}

template <class Model, class... Policies>
template <class L>
EpochTotals Trainer<Model, Policies...>::train_epoch(L& loader, int epoch) {
  static_assert(LoaderContract<L, TaskType>::satisfied, "Trainer::train_epoch: see the sentence above");
  model_->train();
  loader.set_epoch(epoch);
  epoch_ = fit_epoch_ = epoch + 1;
  callbacks_.train_epoch_start(view_, epoch_);
  // 0, or (the first epoch after load_checkpoint) the batches of it already trained: left out.
  const std::int64_t first = checkpoints_.take_resume_batch();
  std::int64_t skip = first;
  if constexpr (ResumesMidEpoch<L>) {
    loader.set_first_batch(first);
    skip = 0;
  }
  batch_in_epoch_ = first;
  EpochTotals totals = first > 0 ? checkpoints_.take_resume_totals() : EpochTotals{};
  const std::int64_t steps = policies_.agree_steps(static_cast<std::int64_t>(loader.size()));
  ProgressBar bar("epoch " + std::to_string(epoch + 1), steps, options_.progress_bar && is_main() && is_terminal());
  std::int64_t done = first;
  Timeline* const timeline = active_timeline();  // fit's, while it runs
  double data_from = timeline ? timeline->now() : 0;
  for (const auto& batch : loader) {
    if (skip > 0 && skip--) continue;  // a loader that cannot begin mid-epoch: read and left out
    if (done == steps) break;  // the ranks agreed on fewer batches than this rank's loader has
    if (timeline) timeline->add(SpanKind::data, -1, data_from, timeline->now());
    callbacks_.train_batch_start(view_, done);
    const EpochTotals b = train_step(tensor_cast<T>(batch.inputs), batch_targets(batch));
    if (timeline) data_from = timeline->now();
    totals += b;
    callbacks_.train_batch_end(view_, done, b);
    bar.update(++done, b.loss());
    if (micro_step_ != 0) continue;
    position_ = {epoch, done, &totals};
    if (checkpoints_.after_step(step_, epoch, done, totals)) break;
    if (mid_epoch_validation_ && options_.val_every_steps > 0 && step_ % options_.val_every_steps == 0) {
      mid_epoch_validation_();
      if (stop_agreed()) break;
    }
  }
  bar.finish();
  position_ = {epoch, done, nullptr};
  epoch_ = 0;
  reduce(totals);
  return totals;
}

template <class Model, class... Policies>
template <class L>
EpochTotals Trainer<Model, Policies...>::evaluate(L& loader, std::int64_t max_batches) {
  static_assert(LoaderContract<L, TaskType, false>::satisfied, "Trainer::evaluate: see the sentence above");
  model_->eval();
  NoGradGuard no_grad;
  EpochTotals totals;
  std::int64_t batches = 0;
  for (const auto& batch : loader) {
    if (max_batches > 0 && batches++ == max_batches) break;
    totals += evaluate_batch(tensor_cast<T>(batch.inputs), batch_targets(batch));
  }
  reduce(totals);
  model_->train();
  return totals;
}

template <class Model, class... Policies>
template <class TrainLoader, class ValLoader>
std::vector<EpochResult> Trainer<Model, Policies...>::fit(TrainLoader& train, ValLoader* val, int epochs) {
  std::vector<EpochResult> results;
  const ActiveTimeline active(timeline_.get());  // the spans of the steps and the policies go here
  stop_requested_ = stopped_early_ = false;
  stop_reason_.clear();
  last_validation_.reset();
  struct MidEpochValidation {
    std::function<void()>& slot;
    ~MidEpochValidation() { slot = nullptr; }
  } mid_epoch{mid_epoch_validation_};
  if (val) mid_epoch_validation_ = [this, val] { validate(*val, false); };
  try {
    callbacks_.fit_start(view_);
    std::optional<PreemptionWatch> watch;
    if (checkpoints_.begin_fit()) watch.emplace();
    for (int epoch = checkpoints_.take_resume_epoch(); epoch < epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      const EpochTotals t = train_epoch(train, epoch);
      if (checkpoints_.preempted()) break;
      position_ = {epoch + 1, 0, nullptr};
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EpochResult r;
      r.epoch = epoch + 1;
      r.train_loss = t.loss();
      r.train = metrics(t);
      r.seconds = seconds;
      r.images_per_second = seconds > 0 ? t.samples / seconds : 0;
      r.lr = optimizer_.lr();
      if (val) {
        // A validation at this very step in this epoch (val_every_steps) is the epoch's.
        const bool validated = last_validation_ && last_validation_->step == step_ && last_validation_->epoch == r.epoch;
        const ValidationResult v = validated ? *last_validation_ : validate(*val, true);
        r.val_loss = v.loss;
        r.val = v.metrics;
      }
      if (logs_) logs_->epoch(r, epochs, writes_tensorboard() ? policies_.loss_scale() : 1.0);
      if (timeline_)
        detail::write_rank_timelines(*timeline_, timeline_events_, options_.timeline, is_main(),
                                     [&](std::span<double> sums) { policies_.sum_over_ranks(sums); });
      results.push_back(r);
      for (auto& callback : epoch_callbacks_) callback(r);
      callbacks_.train_epoch_end(view_, r);
      if (micro_step_ == 0) checkpoints_.after_epoch(step_, r, epochs);
      if (stop_agreed()) break;
    }
  } catch (const std::exception& e) {
    callbacks_.exception(view_, e);
    fit_epoch_ = 0;
    throw;
  }
  if (stopped_early_ && is_main())
    log_line("Trainer: stopping at step " + std::to_string(step_) + " (epoch " + std::to_string(fit_epoch_) +
             "): " + stop_reason_);
  fit_epoch_ = 0;
  callbacks_.fit_end(view_);
  return results;
}

template <class Model, class... Policies>
void Trainer<Model, Policies...>::load_checkpoint(const std::filesystem::path& directory) {
  const checkpoint::Manifest m = checkpoints_.load(directory);
  step_ = m.step;
  if (logs_) logs_->continue_after(m.epoch);
}

template <class Model, class... Policies>
bool Trainer<Model, Policies...>::finite_step(bool skipped_by_policy) {
  const std::optional<NonFiniteGradient> gradient = first_non_finite_gradient(*local_);
  if (!gradient && std::isfinite(step_loss_sum_)) return true;
  const std::string what = non_finite_step_text(step_loss(), gradient, step_place());
  check(!options_.terminate_on_nan, "Trainer: ", what,
        ". Training stops here (TrainerOptions::terminate_on_nan); a learning rate too high, inf or NaN in the "
        "inputs or the loaded weights are the usual causes. Set terminate_on_nan = false to skip such steps instead");
  if (skipped_by_policy) return false;
  ++skipped_steps_;
  if (is_main()) log_line("Trainer: skipping the optimizer step: " + what);
  return false;
}

template <class Model, class... Policies>
template <class L>
ValidationResult Trainer<Model, Policies...>::validate(L& loader, bool epoch_end) {
  callbacks_.validation_start(view_);
  const EpochTotals v = evaluate(loader, options_.limit_val_batches);
  const ValidationResult r{step_, fit_epoch_, epoch_end, v.loss(), metrics(v)};
  if (!epoch_end && logs_) logs_->validation(step_, r.loss, r.metrics);
  callbacks_.validation_end(view_, r);
  last_validation_ = r;
  return r;
}

template <class Model, class... Policies>
bool Trainer<Model, Policies...>::stop_agreed() {
  if (callbacks_.empty()) return false;
  stopped_early_ = policies_.any_rank(stop_requested_);
  if (stopped_early_ && !stop_requested_) stop_reason_ = "a callback on another rank asked to stop";
  return stopped_early_;
}

template <class Model, class... Policies>
template <class BeforeBackward>
EpochTotals Trainer<Model, Policies...>::forward_backward(const Tensor<T>& inputs, const target_type& targets,
                                                           double loss_scale, const BeforeBackward& before_backward) {
  if (auto replaced = policies_.forward_backward(*local_, inputs, targets, task_, loss_scale, before_backward, upload_))
    return *replaced;
  Var<T, D> output, loss;
  {
    const TimelineSpan span(active_timeline(), SpanKind::forward);
    output = model_->forward(Var<T, D>(upload_(inputs)));
    loss = task_.loss(output, targets, loss_scale);
  }
  before_backward(true);
  {
    const TimelineSpan span(active_timeline(), SpanKind::backward);
    backward(loss);
  }
  return batch_totals(task_, output, targets, loss);
}

template <class Model, class... Policies>
EpochTotals Trainer<Model, Policies...>::evaluate_batch(const Tensor<T>& inputs, const target_type& targets) {
  if (auto replaced = policies_.evaluate_batch(*local_, inputs, targets, task_, upload_)) return *replaced;
  const Var<T, D> output = model_->forward(Var<T, D>(upload_(inputs)));
  return batch_totals(task_, output, targets, task_.loss(output, targets, 1.0));
}

template <class Model, class... Policies>
void Trainer<Model, Policies...>::reduce(EpochTotals& totals) {
  totals.metric_state.resize(task_.state_size(), 0.0);  // a rank without batches
  std::vector<double> sums = totals.flat();
  policies_.sum_over_ranks(sums);
  totals = EpochTotals::from_flat(sums);
}

// Trainer<Model, Policies...> whose policies all work on any module (none, or DataParallel and
// Sharded: RunsOnAnyModule, train/policy.hpp) runs Trainer<Module<T, D>, Policies...>'s loop, one
// for every model of a scalar type and device (the prebuilt library holds some: below, and the MPI
// ones at the end of ptrain/mpi.hpp), and hands back the model as its own type. A Pipeline, which
// splits a Sequential, or a task among the policies keeps the Trainer above with its model.
template <class Model, class... Policies>
  requires(!std::same_as<Model, Module<typename Model::scalar_type, typename Model::device_type>> &&
           (RunsOnAnyModule<Policies> && ...))
class Trainer<Model, Policies...>
    : public Trainer<Module<typename Model::scalar_type, typename Model::device_type>, Policies...> {
  using Base = Trainer<Module<typename Model::scalar_type, typename Model::device_type>, Policies...>;

 public:
  static_assert(std::derived_from<Model, Module<typename Base::T, typename Base::D>>,
                "Trainer<Model>: Model must derive from ptrain::Module<T, D> (see docs/architecture.md)");
  template <class Opt>
  Trainer(std::shared_ptr<Model> model, std::shared_ptr<Opt> optimizer)
      : Base(std::move(model), std::move(optimizer)) {}
  template <class Opt>
  Trainer(std::shared_ptr<Model> model, std::shared_ptr<Opt> optimizer, TrainerOptions options, Policies... policies)
      : Base(std::move(model), std::move(optimizer), std::move(options), std::move(policies)...) {}
  Model& model() { return static_cast<Model&>(Base::model()); }
  template <class F>
  void with_whole_model(F&& f) {
    Base::with_whole_model([&](Module<typename Base::T, typename Base::D>&) { f(model()); });
  }
};

}  // namespace ptrain

// The specialisations of a prebuilt Trainer<Module<T, Cpu>, Policies...> (Policies may be none),
// each through LIST (PTRAIN_PREBUILT_TRAINER here, PTRAIN_PREBUILT_TRAINER_MPI at the end of
// ptrain/mpi.hpp): the class, its constructor for Sgd, Adam and AdamW, and fit, train_epoch and
// evaluate on a DataLoader of a TensorDataset.
#define PTRAIN_PREBUILT_TRAINER_CONSTRUCTOR(LIST, T, Opt, ...)                                                   \
  LIST(ptrain::Trainer<ptrain::Module<T, ptrain::Cpu> __VA_OPT__(, ) __VA_ARGS__>::Trainer(                       \
      std::shared_ptr<ptrain::Module<T, ptrain::Cpu>>, std::shared_ptr<ptrain::Opt<T, ptrain::Cpu>>,               \
      ptrain::TrainerOptions __VA_OPT__(, ) __VA_ARGS__))
#define PTRAIN_PREBUILT_TRAINER_MEMBERS(LIST, T, ...)                                                             \
  LIST(class ptrain::Trainer<ptrain::Module<T, ptrain::Cpu> __VA_OPT__(, ) __VA_ARGS__>)                          \
  PTRAIN_PREBUILT_TRAINER_CONSTRUCTOR(LIST, T, Sgd __VA_OPT__(, ) __VA_ARGS__)                                     \
  PTRAIN_PREBUILT_TRAINER_CONSTRUCTOR(LIST, T, Adam __VA_OPT__(, ) __VA_ARGS__)                                    \
  PTRAIN_PREBUILT_TRAINER_CONSTRUCTOR(LIST, T, AdamW __VA_OPT__(, ) __VA_ARGS__)                                   \
  LIST(std::vector<ptrain::EpochResult> ptrain::Trainer<ptrain::Module<T, ptrain::Cpu> __VA_OPT__(, ) __VA_ARGS__>:: \
           fit(ptrain::DataLoader<ptrain::TensorDataset>&, ptrain::DataLoader<ptrain::TensorDataset>*, int))     \
  LIST(ptrain::EpochTotals ptrain::Trainer<ptrain::Module<T, ptrain::Cpu> __VA_OPT__(, ) __VA_ARGS__>::train_epoch( \
      ptrain::DataLoader<ptrain::TensorDataset>&, int))                                                            \
  LIST(ptrain::EpochTotals ptrain::Trainer<ptrain::Module<T, ptrain::Cpu> __VA_OPT__(, ) __VA_ARGS__>::evaluate(    \
      ptrain::DataLoader<ptrain::TensorDataset>&, std::int64_t))

// The loop of every Trainer without policies in float and double on the CPU.
PTRAIN_PREBUILT_TRAINER_MEMBERS(PTRAIN_PREBUILT_TRAINER, float)
PTRAIN_PREBUILT_TRAINER_MEMBERS(PTRAIN_PREBUILT_TRAINER, double)
