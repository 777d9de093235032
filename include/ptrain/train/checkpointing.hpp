#pragma once
// Checkpointing<Model, Set>: the Trainer's checkpoints (train/checkpoint.hpp holds the files):
// saving every N steps and epochs, on a preemption signal (SIGTERM, SIGUSR1; then the Slurm job is
// requeued), loading and resuming. It works through the PolicySet: the checkpoint part a rank
// writes, the policies' own state, the optimizer state gathered whole and split again, the
// parameters gathered around the model's file (Sharded<Zero3>). The Trainer forwards to it and
// keeps the step count; every rank takes part in each call.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/nn/state_dict.hpp"
#include "ptrain/tasks/epoch_totals.hpp"
#include "ptrain/train/callback.hpp"
#include "ptrain/train/checkpoint.hpp"
#include "ptrain/train/detail/trainer_checkpoints.hpp"
#include "ptrain/train/preemption.hpp"
#include "ptrain/train/trainer_options.hpp"

namespace ptrain {

template <class Model, class Set>
class Checkpointing {
 public:
  using T = typename Model::scalar_type;
  using D = typename Model::device_type;

  Checkpointing(Model& model, Module<T, D>& local, Set& policies) : model_(model), local_(local), policies_(policies) {}

  // Where and how often; CheckpointOptions in train/checkpoint.hpp.
  void configure(CheckpointOptions options) {
    check(!options.directory.empty(), "Trainer::save_checkpoints: CheckpointOptions::directory is empty");
    check(options.keep_last >= 1 && options.every_steps >= 0 && options.every_epochs >= 0 && options.keep_best >= 0,
          "Trainer::save_checkpoints: keep_last must be >= 1 and every_steps, every_epochs, keep_best >= 0");
    options_ = std::move(options);
  }
  bool configured() const { return options_.has_value(); }

  template <class Opt>
  void track_optimizer(const std::shared_ptr<Opt>& optimizer) {
    optimizer_ = detail::OptimizerCheckpoint::of(
        optimizer, Set::shards_optimizer_state,
        [this](auto state) { return policies_.gather_optimizer_state(std::move(state)); },
        [this](auto state) { return policies_.shard_optimizer_state(std::move(state)); });
  }
  // The callbacks whose state goes into each checkpoint, and what runs once one is published.
  void track_callbacks(detail::CallbackList& callbacks, std::function<void(const std::filesystem::path&)> saved) {
    callbacks_ = &callbacks;
    saved_ = std::move(saved);
  }
  template <class S>
  void track_scheduler(S& scheduler) {
    scheduler_ = {[&scheduler] { return scheduler.step_count(); },
                  [&scheduler](std::int64_t step) { scheduler.set_step_count(step); }};
  }

  // At the start of a fit: whether it watches for the preemption signals (checkpoints are saved on them).
  bool begin_fit() {
    preempted_ = false;
    return options_ && options_->save_on_preemption;
  }
  // Whether the last fit stopped early for a preemption signal (after saving a checkpoint).
  bool preempted() const { return preempted_; }

  // After each optimizer step of train_epoch: a checkpoint every every_steps steps, and on a
  // preemption signal, which every rank learns of at the same step. True: the epoch stops here.
  bool after_step(std::int64_t step, int epoch, std::int64_t done, const EpochTotals& totals) {
    if (!options_) return false;
    const bool preempt = options_->save_on_preemption && policies_.any_rank(PreemptionWatch::signal() != 0);
    if (preempt || (options_->every_steps > 0 && step % options_->every_steps == 0)) {
      const auto saved = save(step, epoch, done, totals, std::nan(""));
      if (preempt && policies_.is_main()) {
        const int signal = PreemptionWatch::signal();
        log_line(std::string("Trainer: preempted (") + (signal ? signal_name(signal) : "a signal on another rank") +
                 "): saved " + saved.string() + " at step " + std::to_string(step) + "; resume from it");
        // Said before scontrol runs: Slurm may end this step as soon as the requeue takes.
        if (const std::string job = slurm_job_id(); !job.empty()) {
          log_line("Trainer: requeuing Slurm job " + job);
          if (!requeue_slurm_job(job))
            log_line("Trainer: `scontrol requeue " + job + "` failed; submit the job again to resume", stderr);
        }
      }
    }
    preempted_ = preempt;
    return preempt;
  }

  // After each epoch of fit: every every_epochs epochs and after the last, with the best metric.
  void after_epoch(std::int64_t step, const EpochResult& r, int epochs) {
    if (!options_ || options_->every_epochs == 0) return;
    if (r.epoch % options_->every_epochs != 0 && r.epoch != epochs) return;
    save(step, r.epoch, 0, EpochTotals{}, detail::track_best_metric(*options_, r, best_));
  }

  // Writes <directory>/step-<step> through a staging folder that appears whole or not at all.
  std::filesystem::path save(std::int64_t step, std::int64_t epoch, std::int64_t batch, const EpochTotals& totals,
                             double metric) {
    check(options_.has_value(), "Trainer::save_checkpoint: call save_checkpoints(options) first");
    const std::filesystem::path& dir = options_->directory;
    const bool main = policies_.is_main();
    std::string error;
    const auto attempt = [&](auto&& write) {
      try {
        write();
      } catch (const std::exception& e) {
        error = e.what();
      }
    };
    if (main) attempt([&] { checkpoint::begin_staging(dir, step); });
    check(!policies_.any_rank(!error.empty()), "Trainer: checkpoint at step ", step, ": ",
          error.empty() ? "the main rank failed" : error);
    const auto staging = checkpoint::staging_directory(dir, step);
    const CheckpointPart part = policies_.checkpoint_part();
    bool has_policy_state = false;
    policies_.gather_parameters();
    attempt([&] {
      if (part.writes()) save_state_dict(local_, staging / checkpoint::part_file("model", part), io::dtype_of<T>());
      if (optimizer_) optimizer_.save(staging / checkpoint::part_file("optimizer", part), part.writes());
      if (part.writes()) {
        if (const auto state = policies_.checkpoint_state()) {
          checkpoint::save_state(staging / checkpoint::part_file("policies", part), *state);
          has_policy_state = true;
        }
        if (const auto state = callbacks_ ? callbacks_->state() : std::nullopt)
          checkpoint::save_state(staging / checkpoint::part_file("callbacks", part), *state);
      }
      checkpoint::RankState own{global_rng().engine(), totals, {}};
      for (const auto& [name, rng] : model_.named_generators()) own.generators.emplace_back(name, rng->engine());
      checkpoint::save_rank_state(staging / checkpoint::rank_file(part.rank()), own);
    });
    policies_.shard_parameters();
    check(!policies_.any_rank(!error.empty()), "Trainer: checkpoint at step ", step, ": ",
          error.empty() ? "another rank failed to write its files" : error);
    std::filesystem::path saved = checkpoint::step_directory(dir, step);
    if (main) attempt([&] {
      checkpoint::Manifest m;
      m.step = step;
      m.epoch = epoch;
      m.batch_in_epoch = batch;
      m.scheduler_step = scheduler_.step ? scheduler_.step() : -1;
      m.world_size = part.ranks();
      m.parts = part.count;
      m.model_tensors = static_cast<std::int64_t>(detail::state_entry_count(model_));
      m.optimizer = bool(optimizer_);
      m.policies = has_policy_state;
      m.metric_name = options_->best_metric;
      m.metric = metric;
      m.best = best_;
      saved = checkpoint::publish(dir, step, m);
      checkpoint::prune(dir, options_->keep_last, options_->best_is, options_->keep_best);
    });
    check(!policies_.any_rank(!error.empty()), "Trainer: checkpoint at step ", step, ": ",
          error.empty() ? "the main rank failed to publish it" : error);
    if (saved_) saved_(saved);
    return saved;
  }

  // Loads a checkpoint directory (<dir>/step-N): weights, optimizer, policies, scheduler, RNG, and
  // the position fit continues from. An error names the file and what does not match; the
  // checkpoint on disk is only read. Returns its manifest (the step the Trainer continues from).
  checkpoint::Manifest load(const std::filesystem::path& directory) {
    const auto manifest_path = directory / checkpoint::manifest_name;
    const checkpoint::Manifest m = checkpoint::Manifest::read(manifest_path);
    const CheckpointPart part = policies_.checkpoint_part();
    check(m.parts == part.count, manifest_path.string(), ": the checkpoint holds the model in ", m.parts,
          " part(s) (pipeline stages), this run has ", part.count);
    policies_.gather_parameters();
    load_state_dict(local_, directory / checkpoint::part_file("model", part));
    const auto tensors = static_cast<std::int64_t>(detail::state_entry_count(model_));
    check(m.model_tensors == tensors, manifest_path.string(), ": the checkpoint's model has ", m.model_tensors,
          " parameters and buffers, this one ", tensors);
    check(m.optimizer == bool(optimizer_), manifest_path.string(), ": the checkpoint ",
          m.optimizer ? "holds" : "has no", " optimizer state, and this Trainer's optimizer ",
          optimizer_ ? "has state to load" : "has no state()/load_state()");
    if (optimizer_) optimizer_.load(directory / checkpoint::part_file("optimizer", part));
    if (m.policies)
      policies_.load_checkpoint_state(checkpoint::read_state<float>(directory / checkpoint::part_file("policies", part)));
    if (scheduler_.set_step && m.scheduler_step >= 0) scheduler_.set_step(m.scheduler_step);
    load_callback_state(directory / checkpoint::part_file("callbacks", part));
    const int rank = part.rank(), world = part.ranks();
    const auto rank_file = directory / checkpoint::rank_file(rank % m.world_size);
    const checkpoint::RankState own = checkpoint::read_rank_state(rank_file);
    global_rng().engine() = own.rng;
    restore_generators(own, rank_file);
    best_ = m.best;
    resume_ = {m.epoch, m.batch_in_epoch, world == m.world_size ? own.totals : EpochTotals{}};
    policies_.shard_parameters();
    if (policies_.is_main()) detail::log_resume(directory, m, world);
    return m;
  }

  // The epoch the next fit begins with (0, or a loaded checkpoint's), once.
  int take_resume_epoch() { return static_cast<int>(std::exchange(resume_.epoch, 0)); }
  // The batches of the next train_epoch a loaded checkpoint already trained, once, and their sums.
  std::int64_t take_resume_batch() { return std::exchange(resume_.batch, 0); }
  EpochTotals take_resume_totals() { return std::exchange(resume_.totals, EpochTotals{}); }

 private:
  // The model's own generators (its dropout's) as the checkpoint's rank state has them: the same
  // names, or none in a checkpoint written before they were saved (they then start afresh).
  void restore_generators(const checkpoint::RankState& own, const std::filesystem::path& file) {
    const auto generators = model_.named_generators();
    if (own.generators.empty()) return;
    check(own.generators.size() == generators.size(), file.string(), ": the checkpoint holds ", own.generators.size(),
          " generator state(s) of the model, this model has ", generators.size());
    for (std::size_t i = 0; i < generators.size(); ++i) {
      check(own.generators[i].first == generators[i].first, file.string(), ": generator ", i, " is '",
            own.generators[i].first, "', this model's is '", generators[i].first, "'");
      generators[i].second->engine() = own.generators[i].second;
    }
  }

  // A checkpoint without the file (no stateful callback when it was saved) leaves the callbacks as
  // they are, and says so where some have state.
  void load_callback_state(const std::filesystem::path& file) {
    if (!callbacks_ || !callbacks_->stateful()) return;
    if (std::filesystem::exists(file)) callbacks_->load_state(checkpoint::read_state<double>(file), file.string());
    else if (policies_.is_main())
      log_line("Trainer: " + file.string() + " does not exist: the callbacks' state starts afresh", stderr);
  }

  Model& model_;
  Module<T, D>& local_;
  Set& policies_;
  std::optional<CheckpointOptions> options_;
  detail::OptimizerCheckpoint optimizer_;
  detail::SchedulerCheckpoint scheduler_;
  detail::ResumePosition resume_;
  detail::CallbackList* callbacks_ = nullptr;
  std::function<void(const std::filesystem::path&)> saved_;
  double best_ = std::nan("");  // the best value of CheckpointOptions::best_metric so far
  bool preempted_ = false;
};

}  // namespace ptrain
