#pragma once
// Trainer<Model, Policies...>: the training loop. A step is cut into named points where the
// parallel policies plug in (see docs/policies.md):
//   pipeline_grid(), join_pipeline_grid(grid)  once: a pipeline lays out the world, data
//                                       parallelism then averages over one stage's ranks
//   partition(model, data_parallel)     once: the part of the model this rank runs (pipeline);
//                                       every later point gets that part
//   setup(model)                        once, at construction (broadcast, hooks)
//   before_backward(model, ends_in_step) before each backward; false while accumulating gradients
//   loss_scale() -> double              each batch: multiplies the loss's gradient (mixed precision)
//   forward_backward(model, inputs, targets, task, loss_scale, before_backward, upload)
//                                       optional: replaces forward + loss + backward (pipeline)
//   evaluate_batch(model, inputs, targets, task, upload) optional: replaces an evaluation forward
//   optimizer_parameters(params)        once, after setup: the optimizer's params() (Sharded steps
//                                       only its part of them); or (params, sources) with the node
//                                       of the model parameter each stands for (itself, or the one a
//                                       policy's master copies: master_parameters(), master_sources())
//   before_optimizer_step(model)->bool  wait for gradient reductions, sum shared copies, unscale;
//                                       false skips the step (run in that order: the policies that
//                                       average gradients, the pipeline, then the others)
//   gradient_norm_parameters(params)    each clipped step: of the optimizer's params(), those this
//                                       rank counts in the global norm (a pipeline's shared copies once)
//   step_decided(stepped)               once every rank agreed whether the step runs (a pipeline's
//                                       stages skip together): mixed precision moves its loss scale
//   after_optimizer_step(model)         in reverse order, as a stack unwinds (MixedPrecision, listed
//                                       after Sharded, rounds its masters before Sharded gathers them)
//   reduce(std::span<double> sums)      sum an epoch's sums (EpochTotals::flat()) over ranks; with
//                                       a timeline, its spans too (each rank fills its own slots)
//   is_main()                           whether this process prints and writes logs
//   agree_steps(local_steps) -> int64   before each training epoch: how many batches every rank
//                                       trains (DataParallel: the ranks' loaders may differ)
//   checkpoint_part() -> CheckpointPart when a checkpoint is saved or loaded: the pipeline stage,
//                                       the data-parallel replica (train/checkpoint.hpp)
//   checkpoint_state(), load_checkpoint_state(state)  a policy's own saved state (MixedPrecision)
//   gather_optimizer_state(mine), shard_optimizer_state(whole)  a checkpoint's optimizer state made
//                                       whole for saving and split again on load (Sharded)
//   gather_parameters(), shard_parameters()  the model whole on every rank around a checkpoint's
//                                       model, then split again (Sharded<Zero3>)
// A policy implements only the points it needs; a point it names must have the documented
// signature (train/policy.hpp checks it here, so a misspelt or slightly-off point does not compile).
//
// The loss and the metrics are the task's (train/task.hpp): a Task among the Trainer's types (told
// from the policies by its target_type) and its value among the constructor's, Classification{}
// when there is none:
//   Trainer<Net, DataParallel<MpiAllreduce>, Segmentation> t(model, adam, {}, dp, Segmentation{.classes = 3});
//
// The model's device (Model::device_type: Cpu, HostEmulated, Cuda) is where forward, backward and
// the optimizer run; batches come from the loaders on the host and go over once each (on Cuda
// through pinned staging buffers on a copy stream, BatchUpload), and only the loss and the
// correct count come back.
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/core/timeline.hpp"
#include "ptrain/launch/process_info.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/nn/state_dict.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/train/checkpoint.hpp"
#include "ptrain/train/classification.hpp"
#include "ptrain/train/clip_grad_norm.hpp"
#include "ptrain/train/detail/rank_timelines.hpp"
#include "ptrain/train/detail/run_logs.hpp"
#include "ptrain/train/detail/trainer_checkpoints.hpp"
#include "ptrain/train/epoch_totals.hpp"
#include "ptrain/train/loss_scaler.hpp"
#include "ptrain/train/non_finite.hpp"
#include "ptrain/train/policy.hpp"
#include "ptrain/train/preemption.hpp"
#include "ptrain/train/progress.hpp"
#include "ptrain/train/task.hpp"
#include "ptrain/train/trainer_options.hpp"

namespace ptrain {

namespace detail {
template <class... Policies>
struct TaskAmong {
  using type = Classification;
};
template <class First, class... Rest>
struct TaskAmong<First, Rest...> {
  using type = std::conditional_t<NamesTargets<First>, First, typename TaskAmong<Rest...>::type>;
};
// A task among the policies is no policy: it implements the task concept, not the points.
template <class P, class Model, class TaskType>
constexpr bool follows_policy_contract() {
  if constexpr (NamesTargets<P>) return true;
  else return PolicyContract<P, Model, TaskType>::satisfied;
}
}  // namespace detail

template <class Model, class... Policies>
class Trainer {
 public:
  using T = typename Model::scalar_type;
  using D = typename Model::device_type;
  using TaskType = typename detail::TaskAmong<Policies...>::type;
  using target_type = typename TaskType::target_type;
  static_assert(std::derived_from<Model, Module<T, D>>,
                "Trainer<Model>: Model must derive from ptrain::Module<T, D> (see docs/architecture.md)");
  static_assert((0 + ... + int(NamesTargets<Policies>)) <= 1,
                "Trainer: more than one task (a type with a target_type) among the policies; give one");
  static_assert(Task<TaskType, T, D>,
                "Trainer: the task does not satisfy ptrain::Task for the model's scalar type and device (rows, "
                "slice, loss_weight, loss, state_size, accumulate, metric_names, metric_values; see train/task.hpp)");
  static_assert((detail::follows_policy_contract<Policies, Model, TaskType>() && ...),
                "Trainer<Model, Policies...>: a policy breaks the TrainerPolicy contract (the sentence above says "
                "which point and what to change); see docs/policies.md");
  static_assert((0 + ... + int(AveragesGradients<Policies>)) <= 1,
                "Trainer: DataParallel and Sharded (or two of either) both average the gradients over the ranks; "
                "give one: Sharded<Zero1> is DataParallel with the optimizer state split over the ranks; see "
                "docs/policies.md");

  // Options default only without policies: nvcc refuses a default argument before a pack.
  template <class Opt>
  Trainer(std::shared_ptr<Model> model, std::shared_ptr<Opt> optimizer)
      : Trainer(std::move(model), std::move(optimizer), TrainerOptions{}) {}
  template <class Opt>
  Trainer(std::shared_ptr<Model> model, std::shared_ptr<Opt> optimizer, TrainerOptions options, Policies... policies)
      : model_(std::move(model)),
        options_(std::move(options)),
        policies_(std::move(policies)...),
        task_(task_among(policies_)) {
    static_assert(Optimizer<Opt>, "Trainer: the optimizer must satisfy ptrain::Optimizer (step, zero_grad, lr, set_lr)");
    check(model_ != nullptr && optimizer != nullptr, "Trainer: null model or optimizer");
    check(options_.accumulation_steps >= 1, "Trainer: accumulation_steps must be at least 1, got ",
          options_.accumulation_steps);
    check(options_.clip_grad_norm >= 0 && std::isfinite(options_.clip_grad_norm), "Trainer: clip_grad_norm ",
          options_.clip_grad_norm, " (expected 0 for none, or a positive norm)");
    step_optimizer_ = [optimizer] { optimizer->step(); };
    if constexpr (requires { optimizer->params(); }) {
      clip_gradients_ = [this, optimizer] {
        const auto& params = optimizer->params();
        auto counted = params;
        for_each_policy([&]<class P>(P& p) {
          if constexpr (NamesGradientNormParameters<P>) {
            static_assert(GradientNormParametersPoint<P, std::remove_cvref_t<decltype(params)>>,
                          "Trainer policy: gradient_norm_parameters must be callable as `std::vector<Var<U, D>> "
                          "gradient_norm_parameters(const std::vector<Var<U, D>>& params)` (the optimizer's params(); "
                          "U: its scalar type); see docs/policies.md");
            counted = p.gradient_norm_parameters(counted);
          }
        });
        return ptrain::clip_grad_norm(params, options_.clip_grad_norm,
                                      [this](std::span<double> sums) { sum_over_model_parts(sums); }, counted);
      };
    } else {
      check(options_.clip_grad_norm == 0, "Trainer: clip_grad_norm needs an optimizer whose params() gives the "
                                          "parameters it steps (as Sgd and Adam do)");
    }
    lr_ = [optimizer] { return optimizer->lr(); };
    optimizer_checkpoint_ = detail::OptimizerCheckpoint::of(
        optimizer, (... || OptimizerStatePoints<Policies>),
        [this](auto state) {
          for_each_policy([&]<class P>(P& p) {
            if constexpr (OptimizerStatePoints<P>) state = p.gather_optimizer_state(std::move(state));
          });
          return state;
        },
        [this](auto state) {
          for_each_policy([&]<class P>(P& p) {
            if constexpr (OptimizerStatePoints<P>) state = p.shard_optimizer_state(std::move(state));
          });
          return state;
        });
    bool data_parallel = false;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (PipelineGridPoint<P>) {
        const PipelineGrid grid = p.pipeline_grid();
        for_each_policy([&]<class Q>(Q& q) {
          if constexpr (JoinPipelineGridPoint<Q>) {
            q.join_pipeline_grid(grid);
            data_parallel = true;
          }
        });
      }
    });
    local_ = model_.get();
    for_each_policy([&]<class P>(P& p) {
      if constexpr (PartitionPoint<P, Model>) local_ = &p.partition(*model_, data_parallel);
    });
    for_each_policy([&]<class P>(P& p) {
      if constexpr (SetupPoint<P, Model>) p.setup(*local_);
    });
    if constexpr ((... || ReduceScattersGradients<Policies>))
      for_each_policy([&]<class P>(P& p) {
        if constexpr (requires { p.shared_parameters(); })
          check(p.shared_parameters().empty(), "Trainer: the pipeline's stages share ", p.shared_parameters().size(),
                " parameter(s) (", p.shared_parameters().front().name,
                " first), whose copies' gradients are summed over the stages, but Sharded<Zero2> and <Zero3> keep "
                "each gradient on one replica of a stage only; use Sharded<Zero1> or DataParallel beside this pipeline");
      });
    offer_optimizer_parameters(*optimizer);
    if (is_main()) logs_.emplace(options_, task_.metric_names());
    if (!options_.timeline.empty()) timeline_ = std::make_unique<Timeline>();
  }

  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  Model& model() { return *model_; }
  // The layers this rank runs: the whole model, or its pipeline stage.
  Module<T, D>& local_model() { return *local_; }
  template <class P>
  P& policy() { return std::get<P>(policies_); }
  const TaskType& task() const { return task_; }
  // The task's metric values of (reduced) totals.
  MetricValues metrics(const EpochTotals& totals) const { return metric_values(task_, totals); }
  std::int64_t global_step() const { return step_; }
  // Optimizer steps skipped for an inf or NaN loss or gradient (with terminate_on_nan false).
  std::int64_t skipped_steps() const { return skipped_steps_; }
  // The global gradient norm of the last step clipped (TrainerOptions::clip_grad_norm), before
  // clipping; NaN before the first.
  double last_gradient_norm() const { return last_gradient_norm_; }

  // Called after every optimizer step with the global step count (learning-rate schedules).
  void on_step_end(std::function<void(std::int64_t step)> callback) { step_callbacks_.push_back(std::move(callback)); }
  // Called after every epoch with its result.
  void on_epoch_end(std::function<void(const EpochResult&)> callback) { epoch_callbacks_.push_back(std::move(callback)); }

  // One batch: forward and backward, and an optimizer step once accumulation_steps batches have
  // added their gradients. Returns this batch's sums (loss, samples, the task's metric state).
  EpochTotals train_step(const Tensor<T>& inputs, const target_type& targets) {
    const int k = options_.accumulation_steps;
    if (micro_step_ == 0) {
      model_->zero_grad();
      step_start_ = std::chrono::steady_clock::now();
      step_samples_ = 0;
    }
    const bool ends_in_step = ++micro_step_ == k;
    const auto before_backward = [&](bool last_backward_of_batch) {
      for_each_policy([&]<class P>(P& p) {
        if constexpr (BeforeBackwardPoint<P, Model>)
          p.before_backward(*local_, ends_in_step && last_backward_of_batch);
      });
    };
    EpochTotals batch = forward_backward(inputs, targets, policy_loss_scale() / k, before_backward);
    ++batch_in_epoch_;
    step_loss_sum_ += batch.loss_sum;
    step_loss_weight_ += batch.loss_weight;
    step_samples_ += batch.samples;
    if (!ends_in_step) return batch;
    micro_step_ = 0;
    bool proceed = true;
    const double step_loss_scale = writes_tensorboard() ? policy_loss_scale() : 1.0;  // the scale this step used
    const std::optional<double> loss =
        step_loss_weight_ > 0 ? std::optional<double>(step_loss_sum_ / step_loss_weight_) : std::nullopt;
    {
      const TimelineSpan span(active_timeline(), SpanKind::gradient_wait);
      // Gradients complete in this order whatever the policies' order: averaged over the replicas,
      // then summed over the stages that share a parameter, then (MixedPrecision) unscaled.
      for_each_policy([&]<class P>(P& p) {
        if constexpr (BeforeOptimizerStepPoint<P, Model> && AveragesGradients<P>)
          proceed = p.before_optimizer_step(*local_) && proceed;
      });
      for_each_policy([&]<class P>(P& p) {
        if constexpr (BeforeOptimizerStepPoint<P, Model> && !AveragesGradients<P> && PipelineGridPoint<P>)
          proceed = p.before_optimizer_step(*local_) && proceed;
      });
      for_each_policy([&]<class P>(P& p) {
        if constexpr (BeforeOptimizerStepPoint<P, Model> && !AveragesGradients<P> && !PipelineGridPoint<P>)
          proceed = p.before_optimizer_step(*local_) && proceed;
      });
    }
    // A policy's skip (an fp16 overflow) is normal while the loss is finite; a non-finite loss is
    // not, and no loss scale mends it.
    if (proceed || !std::isfinite(step_loss_sum_)) proceed = finite_step(!proceed) && proceed;
    proceed = every_stage_steps(proceed);
    try {
      for_each_policy([&]<class P>(P& p) {
        if constexpr (StepDecidedPoint<P>) p.step_decided(proceed);
      });
    } catch (const LossScaleUnderflow& e) {
      fail("Trainer: ", non_finite_step_text(step_loss(), first_non_finite_gradient(*local_), step_place()), ". ",
           e.what());
    }
    step_loss_sum_ = step_loss_weight_ = 0;
    if (proceed) {
      NoGradGuard no_grad;
      const TimelineSpan span(active_timeline(), SpanKind::optimizer);
      if (options_.clip_grad_norm > 0) last_gradient_norm_ = clip_gradients_();
      step_optimizer_();
    }
    for_each_policy_in_reverse([&]<class P>(P& p) {
      if constexpr (AfterOptimizerStepPoint<P, Model>) p.after_optimizer_step(*local_);
    });
    ++step_;
    if (writes_tensorboard()) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
      logs_->step(step_, loss, lr_(), step_loss_scale, step_samples_, seconds);
    }
    for (auto& callback : step_callbacks_) callback(step_);
    return batch;
  }

  template <class Loader>
  EpochTotals train_epoch(Loader& loader, int epoch) {
    model_->train();
    loader.set_epoch(epoch);
    epoch_ = epoch + 1;
    // 0, or (the first epoch after load_checkpoint) the batches of it already trained: left out.
    const std::int64_t first = std::exchange(resume_.batch, 0);
    std::int64_t skip = first;
    if constexpr (requires { loader.set_first_batch(first); }) {
      loader.set_first_batch(first);
      skip = 0;
    }
    batch_in_epoch_ = first;
    EpochTotals totals = first > 0 ? std::exchange(resume_.totals, EpochTotals{}) : EpochTotals{};
    const std::int64_t steps = agreed_steps(static_cast<std::int64_t>(loader.size()));
    ProgressBar bar("epoch " + std::to_string(epoch + 1), steps, options_.progress_bar && is_main() && is_terminal());
    std::int64_t done = first;
    Timeline* const timeline = active_timeline();  // fit's, while it runs
    double data_from = timeline ? timeline->now() : 0;
    for (const auto& batch : loader) {
      if (skip > 0 && skip--) continue;  // a loader that cannot begin mid-epoch: read and left out
      if (done == steps) break;  // the ranks agreed on fewer batches than this rank's loader has
      if (timeline) timeline->add(SpanKind::data, -1, data_from, timeline->now());
      const EpochTotals b = train_step(tensor_cast<T>(batch.inputs), batch_targets(batch));
      if (timeline) data_from = timeline->now();
      totals += b;
      bar.update(++done, b.loss());
      if (checkpoint_after_step(epoch, done, totals)) break;
    }
    bar.finish();
    epoch_ = 0;
    reduce(totals);
    return totals;
  }

  template <class Loader>
  EpochTotals evaluate(Loader& loader) {
    model_->eval();
    NoGradGuard no_grad;
    EpochTotals totals;
    for (const auto& batch : loader) totals += evaluate_batch(tensor_cast<T>(batch.inputs), batch_targets(batch));
    reduce(totals);
    model_->train();
    return totals;
  }

  // Trains for epochs, evaluating on val (when given) after each; prints one line per epoch.
  template <class TrainLoader, class ValLoader>
  std::vector<EpochResult> fit(TrainLoader& train, ValLoader* val, int epochs) {
    std::vector<EpochResult> results;
    const ActiveTimeline active(timeline_.get());  // the spans of the steps and the policies go here
    preempted_ = false;
    std::optional<PreemptionWatch> watch;
    if (checkpoints_ && checkpoints_->save_on_preemption) watch.emplace();
    for (int epoch = static_cast<int>(std::exchange(resume_.epoch, 0)); epoch < epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      const EpochTotals t = train_epoch(train, epoch);
      if (preempted_) break;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EpochResult r;
      r.epoch = epoch + 1;
      r.train_loss = t.loss();
      r.train = metrics(t);
      r.seconds = seconds;
      r.images_per_second = seconds > 0 ? t.samples / seconds : 0;
      r.lr = lr_();
      if (val) {
        const EpochTotals v = evaluate(*val);
        r.val_loss = v.loss();
        r.val = metrics(v);
      }
      if (logs_) logs_->epoch(r, epochs, writes_tensorboard() ? policy_loss_scale() : 1.0);
      if (timeline_)
        detail::write_rank_timelines(*timeline_, timeline_events_, options_.timeline, is_main(),
                                     [&](std::span<double> sums) { sum_over_ranks(sums); });
      results.push_back(r);
      for (auto& callback : epoch_callbacks_) callback(r);
      checkpoint_after_epoch(r, epochs);
    }
    return results;
  }
  template <class TrainLoader>
  std::vector<EpochResult> fit(TrainLoader& train, int epochs) {
    return fit(train, static_cast<TrainLoader*>(nullptr), epochs);
  }

  // ---- Checkpoints (train/checkpoint.hpp) ----
  // fit saves a checkpoint under options.directory every N steps and epochs, and when SIGTERM or
  // SIGUSR1 reaches any rank (then fit returns early and preempted() is true). Every rank takes
  // part; the directory must be one every rank sees (a shared file system across nodes).
  void save_checkpoints(CheckpointOptions options) {
    check(!options.directory.empty(), "Trainer::save_checkpoints: CheckpointOptions::directory is empty");
    check(options.keep_last >= 1 && options.every_steps >= 0 && options.every_epochs >= 0,
          "Trainer::save_checkpoints: keep_last must be >= 1 and every_steps, every_epochs >= 0");
    checkpoints_ = std::move(options);
  }
  // A learning-rate Scheduler (optim/scheduler.hpp) whose step count is saved and restored.
  template <class S>
  void checkpoint_scheduler(S& scheduler) {
    scheduler_checkpoint_ = {[&scheduler] { return scheduler.step_count(); },
                             [&scheduler](std::int64_t step) { scheduler.set_step_count(step); }};
  }
  // Whether the last fit stopped early for a preemption signal (after saving a checkpoint).
  bool preempted() const { return preempted_; }

  // Loads a checkpoint directory (<dir>/step-N): weights, optimizer, policies, scheduler, RNG, and
  // the position fit continues from (--epochs stays the total). An error names the file and what
  // does not match; the checkpoint on disk is only read.
  void load_checkpoint(const std::filesystem::path& directory) {
    const auto manifest_path = directory / checkpoint::manifest_name;
    const checkpoint::Manifest m = checkpoint::Manifest::read(manifest_path);
    const CheckpointPart part = checkpoint_part();
    check(m.parts == part.count, manifest_path.string(), ": the checkpoint holds the model in ", m.parts,
          " part(s) (pipeline stages), this run has ", part.count);
    for_each_parameter_policy([](auto& p) { p.gather_parameters(); });
    load_state_dict(*local_, directory / checkpoint::part_file("model", part));
    const auto tensors = static_cast<std::int64_t>(detail::state_entry_count(*model_));
    check(m.model_tensors == tensors, manifest_path.string(), ": the checkpoint's model has ", m.model_tensors,
          " parameters and buffers, this one ", tensors);
    check(m.optimizer == bool(optimizer_checkpoint_), manifest_path.string(), ": the checkpoint ",
          m.optimizer ? "holds" : "has no", " optimizer state, and this Trainer's optimizer ",
          optimizer_checkpoint_ ? "has state to load" : "has no state()/load_state()");
    if (optimizer_checkpoint_) optimizer_checkpoint_.load(directory / checkpoint::part_file("optimizer", part));
    if (m.policies) {
      auto state = checkpoint::read_state<float>(directory / checkpoint::part_file("policies", part));
      for_each_policy([&]<class P>(P& p) {
        if constexpr (CheckpointStatePoint<P>) p.load_checkpoint_state(state);
      });
    }
    if (scheduler_checkpoint_.set_step && m.scheduler_step >= 0) scheduler_checkpoint_.set_step(m.scheduler_step);
    const int rank = part.rank(), world = part.ranks();
    const checkpoint::RankState own =
        checkpoint::read_rank_state(directory / checkpoint::rank_file(rank % m.world_size));
    global_rng().engine() = own.rng;
    restore_generators(own, directory / checkpoint::rank_file(rank % m.world_size));
    step_ = m.step;
    best_ = m.best;
    resume_ = {m.epoch, m.batch_in_epoch, world == m.world_size ? own.totals : EpochTotals{}};
    if (logs_) logs_->continue_after(m.epoch);
    for_each_parameter_policy([](auto& p) { p.shard_parameters(); });
    if (is_main()) detail::log_resume(directory, m, world);
  }
  // The newest checkpoint under directory, loaded; false when there is none (a first run).
  bool resume_latest(const std::filesystem::path& directory) {
    const auto latest = checkpoint::latest(directory);
    if (latest) load_checkpoint(*latest);
    return latest.has_value();
  }

  bool is_main() {
    bool main = true;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (IsMainPoint<P>) main = main && p.is_main();
    });
    return main;
  }

 private:
  static TaskType task_among(const std::tuple<Policies...>& policies) {
    if constexpr ((... || NamesTargets<Policies>)) return std::get<TaskType>(policies);
    else return Classification{};
  }

  // The policies, leaving out the task among them.
  template <class F>
  void for_each_policy(F&& f) {
    std::apply([&](auto&... p) { (apply_unless_task(f, p), ...); }, policies_);
  }
  template <class F>
  void for_each_policy_in_reverse(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (apply_unless_task(f, std::get<sizeof...(I) - 1 - I>(policies_)), ...);
    }(std::index_sequence_for<Policies...>{});
  }
  template <class F, class P>
  static void apply_unless_task(F& f, P& p) {
    if constexpr (!NamesTargets<P>) f(p);
  }
  // The policies that split the model's parameters over the ranks (Sharded<Zero3>).
  template <class F>
  void for_each_parameter_policy(F&& f) {
    for_each_policy([&]<class P>(P& p) {
      if constexpr (ParameterPoints<P>) f(p);
    });
  }

  template <class Batch>
  target_type batch_targets(const Batch& batch) const {
    if constexpr (requires { task_.batch_targets(batch); }) return task_.batch_targets(batch);
    else return batch.targets;
  }

  // The optimizer's parameters, to the policies that step only a part of them (Sharded).
  template <class Opt>
  void offer_optimizer_parameters(Opt& optimizer) {
    for_each_policy([&]<class P>(P& p) {
      if constexpr (NamesOptimizerParameters<P>) {
        static_assert(requires { optimizer.params(); },
                      "Trainer: a policy (Sharded) steps only its part of the optimizer's parameters, and this "
                      "optimizer has no params() to tell them (Sgd, Adam and AdamW have)");
        static_assert(OptimizerParametersPoint<P, std::remove_cvref_t<decltype(optimizer.params())>>,
                      "Trainer policy: optimizer_parameters must be callable as `void optimizer_parameters(const "
                      "std::vector<Var<U, D>>& params)` (the optimizer's params(); U: its scalar type); see "
                      "docs/policies.md");
        if constexpr (requires { p.optimizer_parameters(optimizer.params(), std::vector<const void*>{}); })
          p.optimizer_parameters(optimizer.params(), parameter_sources(optimizer.params()));
        else
          p.optimizer_parameters(optimizer.params());
      }
    });
  }
  // Of each of the optimizer's parameters, the node of the model parameter it stands for: itself,
  // or the one whose master it is (MixedPrecision).
  template <class Params>
  std::vector<const void*> parameter_sources(const Params& params) {
    std::vector<const void*> sources;
    for (const auto& p : params) sources.push_back(p.node().get());
    for_each_policy([&]<class P>(P& p) {
      if constexpr (requires { p.master_parameters(); p.master_sources(); }) {
        std::map<const void*, const void*> source_of;
        const std::vector<const void*> copied = p.master_sources();
        for (std::size_t i = 0; i < copied.size(); ++i) source_of[p.master_parameters()[i].node().get()] = copied[i];
        for (const void*& s : sources)
          if (const auto found = source_of.find(s); found != source_of.end()) s = found->second;
      }
    });
    return sources;
  }

  // Whether the step's loss and gradients are finite; when not, an Error (terminate_on_nan) or a
  // skipped step, said and counted unless a policy already skipped it.
  bool finite_step(bool skipped_by_policy) {
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

  // The step's summed loss; none where this rank computes no loss (a pipeline stage before the last).
  std::optional<double> step_loss() const {
    return step_loss_weight_ > 0 ? std::optional<double>(step_loss_sum_) : std::nullopt;
  }
  StepPlace step_place() const { return {step_ + 1, epoch_, batch_in_epoch_, detect_process_info().rank}; }

  // The batches every rank trains this epoch: local_steps, unless a policy (DataParallel) makes
  // the ranks agree on another count.
  std::int64_t agreed_steps(std::int64_t local_steps) {
    std::int64_t steps = local_steps;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (AgreeStepsPoint<P>) steps = p.agree_steps(steps);
    });
    return steps;
  }

  // Whether this step runs: the rank's own verdict, unless a pipeline splits the model or a policy
  // shards the gradients, when the ranks see different gradients and one rank's skip (an fp16
  // overflow) is every rank's.
  bool every_stage_steps(bool local) {
    if constexpr (!(... || PipelineGridPoint<Policies>) && !(... || ShardsGradients<Policies>)) {
      return local;
    } else {
      double vetoes = local ? 0.0 : 1.0;
      sum_over_ranks(std::span<double>(&vetoes, 1));
      return vetoes == 0;
    }
  }

  bool writes_tensorboard() const { return logs_ && logs_->writes_tensorboard(); }

  // The product of the policies' loss scales (mixed precision's), 1 without any.
  double policy_loss_scale() {
    double product = 1.0;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (LossScalePoint<P>) product *= p.loss_scale();
    });
    return product;
  }

  // loss_scale: 1/k under gradient accumulation, so k batches add up to their mean's gradient, times
  // the policies' loss scales (applied in float to the loss's gradient: fp16 cannot hold 65536).
  template <class BeforeBackward>
  EpochTotals forward_backward(const Tensor<T>& inputs, const target_type& targets, double loss_scale,
                               const BeforeBackward& before_backward) {
    std::optional<EpochTotals> replaced;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (ForwardBackwardPoint<P, Model, TaskType>)
        replaced = p.forward_backward(*local_, inputs, targets, task_, loss_scale, before_backward, upload_);
    });
    if (replaced) return *replaced;
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

  EpochTotals evaluate_batch(const Tensor<T>& inputs, const target_type& targets) {
    std::optional<EpochTotals> replaced;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (EvaluateBatchPoint<P, Model, TaskType>)
        replaced = p.evaluate_batch(*local_, inputs, targets, task_, upload_);
    });
    if (replaced) return *replaced;
    const Var<T, D> output = model_->forward(Var<T, D>(upload_(inputs)));
    return batch_totals(task_, output, targets, task_.loss(output, targets, 1.0));
  }

  void reduce(EpochTotals& totals) {
    totals.metric_state.resize(task_.state_size(), 0.0);  // a rank without batches
    std::vector<double> sums = totals.flat();
    sum_over_ranks(sums);
    totals = EpochTotals::from_flat(sums);
  }
  // Sums over the ranks the policies span (data-parallel replicas, pipeline stages).
  void sum_over_ranks(std::span<double> sums) {
    for_each_policy([&]<class P>(P& p) {
      if constexpr (ReducePoint<P>) p.reduce(sums);
    });
  }
  // Sums over the ranks whose gradients are different parts of the model's when the optimizer
  // steps: a pipeline's stages, and a Sharded policy's ranks (each holds its own parameters'); not
  // over replicas, which hold the same averaged gradients.
  void sum_over_model_parts(std::span<double> sums) {
    for_each_policy([&]<class P>(P& p) {
      if constexpr ((PipelineGridPoint<P> || OptimizerStatePoints<P>) && ReducePoint<P>) p.reduce(sums);
    });
  }

  // ---- Checkpoints ----
  // Whether any rank says yes: the policies' reduce over one value (every rank calls it).
  bool any_rank(bool yes) {
    double flag = yes ? 1 : 0;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (ReducePoint<P>) p.reduce(std::span<double>(&flag, 1));
    });
    return flag > 0;
  }

  CheckpointPart checkpoint_part() {
    CheckpointPart part;
    for_each_policy([&]<class P>(P& p) {
      if constexpr (CheckpointPartPoint<P>) {
        const CheckpointPart mine = p.checkpoint_part();
        if (mine.count > 1) part.index = mine.index, part.count = mine.count;
        if (mine.replicas > 1) part.replica = mine.replica, part.replicas = mine.replicas;
      }
    });
    return part;
  }

  // After each batch of train_epoch: a checkpoint every every_steps steps, and on a preemption
  // signal, which every rank learns of at the same step. True: the epoch stops here (preempted).
  bool checkpoint_after_step(int epoch, std::int64_t done, const EpochTotals& totals) {
    if (!checkpoints_ || micro_step_ != 0) return false;
    const bool preempt = checkpoints_->save_on_preemption && any_rank(PreemptionWatch::signal() != 0);
    if (preempt || (checkpoints_->every_steps > 0 && step_ % checkpoints_->every_steps == 0)) {
      const auto saved = save_checkpoint_at(epoch, done, totals, std::nan(""));
      if (preempt && is_main()) {
        const int signal = PreemptionWatch::signal();
        log_line(std::string("Trainer: preempted (") + (signal ? signal_name(signal) : "a signal on another rank") +
                 "): saved " + saved.string() + " at step " + std::to_string(step_) + "; resume from it");
        if (requeue_slurm_job()) log_line("Trainer: requeued Slurm job " + std::string(std::getenv("SLURM_JOB_ID")));
      }
    }
    preempted_ = preempt;
    return preempt;
  }

  void checkpoint_after_epoch(const EpochResult& r, int epochs) {
    if (!checkpoints_ || checkpoints_->every_epochs == 0 || micro_step_ != 0) return;
    if (r.epoch % checkpoints_->every_epochs != 0 && r.epoch != epochs) return;
    save_checkpoint_at(r.epoch, 0, EpochTotals{}, detail::track_best_metric(*checkpoints_, r, best_));
  }

  // The model's own generators (its dropout's) as the checkpoint's rank state has them: the same
  // names, or none in a checkpoint written before they were saved (they then start afresh).
  void restore_generators(const checkpoint::RankState& own, const std::filesystem::path& file) {
    const auto generators = model_->named_generators();
    if (own.generators.empty()) return;
    check(own.generators.size() == generators.size(), file.string(), ": the checkpoint holds ", own.generators.size(),
          " generator state(s) of the model, this model has ", generators.size());
    for (std::size_t i = 0; i < generators.size(); ++i) {
      check(own.generators[i].first == generators[i].first, file.string(), ": generator ", i, " is '",
            own.generators[i].first, "', this model's is '", generators[i].first, "'");
      generators[i].second->engine() = own.generators[i].second;
    }
  }

  std::filesystem::path save_checkpoint_at(std::int64_t epoch, std::int64_t batch, const EpochTotals& totals,
                                           double metric) {
    check(checkpoints_.has_value(), "Trainer::save_checkpoint: call save_checkpoints(options) first");
    const std::filesystem::path& dir = checkpoints_->directory;
    const bool main = is_main();
    std::string error;
    const auto attempt = [&](auto&& write) {
      try {
        write();
      } catch (const std::exception& e) {
        error = e.what();
      }
    };
    if (main) attempt([&] { checkpoint::begin_staging(dir, step_); });
    check(!any_rank(!error.empty()), "Trainer: checkpoint at step ", step_, ": ",
          error.empty() ? "the main rank failed" : error);
    const auto staging = checkpoint::staging_directory(dir, step_);
    const CheckpointPart part = checkpoint_part();
    bool policies = false;
    for_each_parameter_policy([](auto& p) { p.gather_parameters(); });
    attempt([&] {
      if (part.writes()) save_state_dict(*local_, staging / checkpoint::part_file("model", part), io::dtype_of<T>());
      if (optimizer_checkpoint_) optimizer_checkpoint_.save(staging / checkpoint::part_file("optimizer", part), part.writes());
      if (part.writes()) {
        OptimizerState<float> state;
        for_each_policy([&]<class P>(P& p) {
          if constexpr (CheckpointStatePoint<P>) {
            const OptimizerState<float> mine = p.checkpoint_state();
            state.scalars.insert(state.scalars.end(), mine.scalars.begin(), mine.scalars.end());
            state.tensors.insert(state.tensors.end(), mine.tensors.begin(), mine.tensors.end());
            policies = true;
          }
        });
        if (policies) checkpoint::save_state(staging / checkpoint::part_file("policies", part), state);
      }
      checkpoint::RankState own{global_rng().engine(), totals, {}};
      for (const auto& [name, rng] : model_->named_generators()) own.generators.emplace_back(name, rng->engine());
      checkpoint::save_rank_state(staging / checkpoint::rank_file(part.rank()), own);
    });
    for_each_parameter_policy([](auto& p) { p.shard_parameters(); });
    check(!any_rank(!error.empty()), "Trainer: checkpoint at step ", step_, ": ",
          error.empty() ? "another rank failed to write its files" : error);
    std::filesystem::path saved = checkpoint::step_directory(dir, step_);
    if (main) attempt([&] {
      checkpoint::Manifest m;
      m.step = step_;
      m.epoch = epoch;
      m.batch_in_epoch = batch;
      m.scheduler_step = scheduler_checkpoint_.step ? scheduler_checkpoint_.step() : -1;
      m.world_size = part.ranks();
      m.parts = part.count;
      m.model_tensors = static_cast<std::int64_t>(detail::state_entry_count(*model_));
      m.optimizer = bool(optimizer_checkpoint_);
      m.policies = policies;
      m.metric_name = checkpoints_->best_metric;
      m.metric = metric;
      m.best = best_;
      saved = checkpoint::publish(dir, step_, m);
      checkpoint::prune(dir, checkpoints_->keep_last, checkpoints_->best_is);
    });
    check(!any_rank(!error.empty()), "Trainer: checkpoint at step ", step_, ": ",
          error.empty() ? "the main rank failed to publish it" : error);
    return saved;
  }

  std::optional<CheckpointOptions> checkpoints_;
  detail::OptimizerCheckpoint optimizer_checkpoint_;
  detail::SchedulerCheckpoint scheduler_checkpoint_;
  detail::ResumePosition resume_;
  double best_ = std::nan("");  // the best value of CheckpointOptions::best_metric so far
  bool preempted_ = false;

  std::shared_ptr<Model> model_;
  Module<T, D>* local_ = nullptr;
  BatchUpload<D> upload_;
  TrainerOptions options_;
  std::tuple<Policies...> policies_;
  TaskType task_;
  std::function<void()> step_optimizer_;
  std::function<double()> clip_gradients_;  // clips to options_.clip_grad_norm, returns the norm before
  double last_gradient_norm_ = std::nan("");
  std::function<double()> lr_;
  std::optional<detail::RunLogs> logs_;  // on the main rank
  std::unique_ptr<Timeline> timeline_;
  std::vector<TimelineEvent> timeline_events_;  // every rank's, on the main rank
  std::chrono::steady_clock::time_point step_start_;
  double step_samples_ = 0;
  std::vector<std::function<void(std::int64_t)>> step_callbacks_;
  std::vector<std::function<void(const EpochResult&)>> epoch_callbacks_;
  std::int64_t step_ = 0;
  int micro_step_ = 0;
  std::int64_t skipped_steps_ = 0;
  double step_loss_sum_ = 0;       // the losses of this step's batches (several under accumulation)
  double step_loss_weight_ = 0;    // and their weights: 0 on a pipeline stage before the last
  int epoch_ = 0;                  // from 1 inside train_epoch, 0 outside it
  std::int64_t batch_in_epoch_ = 0;
};

}  // namespace ptrain
