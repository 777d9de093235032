#pragma once
// The Trainer's side of checkpoints (train/checkpoint.hpp holds the files): how its optimizer and
// scheduler are saved and restored, where a resumed fit begins, the best metric kept, and what a
// resume says.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/train/checkpoint.hpp"
#include "ptrain/tasks/epoch_totals.hpp"
#include "ptrain/train/trainer_options.hpp"

namespace ptrain::detail {

// The optimizer's state() / load_state() as files, or nothing when it has neither. A policy that
// splits the state over the ranks (Sharded) gathers it whole for the writing rank and keeps this
// rank's part of what is read: gather(state) and shard(state), with split saying whether any does.
struct OptimizerCheckpoint {
  // Every rank calls save; writes: whether this rank writes the file.
  std::function<void(const std::filesystem::path&, bool writes)> save;
  std::function<void(const std::filesystem::path&)> load;

  template <class Opt, class Gather, class Shard>
  static OptimizerCheckpoint of(const std::shared_ptr<Opt>& optimizer, bool split, Gather gather, Shard shard) {
    OptimizerCheckpoint c;
    if constexpr (requires { optimizer->state(); optimizer->load_state(optimizer->state()); }) {
      using State = decltype(optimizer->state());
      c.save = [optimizer, split, gather](const std::filesystem::path& path, bool writes) {
        if (!writes && !split) return;
        const State state = gather(optimizer->state());
        if (writes) checkpoint::save_state(path, state);
      };
      c.load = [optimizer, shard](const std::filesystem::path& path) {
        optimizer->load_state(shard(checkpoint::read_state<typename State::value_type>(path)));
      };
    }
    return c;
  }
  explicit operator bool() const { return bool(save); }
};

// A learning-rate Scheduler's step count (optim/scheduler.hpp), or nothing.
struct SchedulerCheckpoint {
  std::function<std::int64_t()> step;
  std::function<void(std::int64_t)> set_step;
};

struct ResumePosition {
  std::int64_t epoch = 0;  // where the next fit begins
  std::int64_t batch = 0;  // and the next train_epoch
  EpochTotals totals;      // this rank's sums of the epoch's batches before `batch`
};

// The epoch's value of options.best_metric (NaN when none is named), and best moved to it when
// it is better.
inline double track_best_metric(const CheckpointOptions& options, const EpochResult& r, double& best) {
  const std::string& name = options.best_metric;
  if (name.empty()) return std::nan("");
  const bool val = name.rfind("val_", 0) == 0;
  check(val || name.rfind("train_", 0) == 0, "CheckpointOptions::best_metric '", name,
        "': expected val_loss, train_loss or val_/train_ and one of the task's metrics");
  const std::string metric_name = name.substr(val ? 4 : 6);
  const MetricValues& values = val ? r.val : r.train;
  const double metric = metric_name == "loss" ? (val ? r.val_loss : r.train_loss) : values.at(metric_name);
  const bool better = options.best_is == BestIs::lower ? metric < best : metric > best;
  if (std::isnan(best) || better) best = metric;
  return metric;
}

// The main rank's lines on resuming; world: this run's ranks.
inline void log_resume(const std::filesystem::path& directory, const checkpoint::Manifest& m, int world) {
  log_line("Trainer: resuming from " + directory.string() + " at epoch " + std::to_string(m.epoch + 1) + ", batch " +
           std::to_string(m.batch_in_epoch) + ", step " + std::to_string(m.step));
  if (world != m.world_size)
    log_line("Trainer: the checkpoint was written by " + std::to_string(m.world_size) + " rank(s), this run has " +
                 std::to_string(world) + ": the data order changes (each rank's shard of every epoch, the rest of "
                 "this one included), each rank takes rank (r mod " + std::to_string(m.world_size) +
                 ")'s RNG, and this epoch's loss counts only the batches after the resume",
             stderr);
}

}  // namespace ptrain::detail
