#pragma once
// ModelCheckpoint: the Trainer's checkpoints (train/checkpointing.hpp) saved at every validation
// ranked by the monitored metric, every N optimizer steps, and kept as Lightning's
// ModelCheckpoint(monitor, mode, save_top_k, every_n_train_steps, save_last) keeps them: the
// top_k best by the metric plus the newest (what --resume continues from). A checkpoint goes whole
// or not at all: it is written to a staging folder and renamed, and pruning renames a checkpoint
// out of the step-N names before removing it, so a kill at any point leaves the newest loadable.
// A train_ metric (or none) is checked at each epoch's end instead of each validation.
//   trainer.add_callback(ModelCheckpoint({.directory = "ckpt", .monitor = {.name = "val_accuracy",
//                                         .mode = BestIs::higher}, .top_k = 3}));
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

#include "ptrain/core/error.hpp"
#include "ptrain/train/callback.hpp"
#include "ptrain/train/callbacks/monitor.hpp"
#include "ptrain/train/checkpoint.hpp"

namespace ptrain {

struct ModelCheckpointOptions {
  std::filesystem::path directory;  // required
  Monitor monitor;                  // name empty: checkpoints unranked, only the newest kept
  int top_k = 1;                    // the best k by the monitor kept (>= 0), beside the newest
  std::int64_t every_steps = 0;     // also a checkpoint every N optimizer steps (0: none)
  bool save_on_preemption = true;   // SIGTERM/SIGUSR1: save and return from fit (as CheckpointOptions)
};

class ModelCheckpoint {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options) : options_(std::move(options)) {
    check(!options_.directory.empty(), "ModelCheckpoint: directory is empty");
    if (!options_.monitor.name.empty()) options_.monitor.check_valid("ModelCheckpoint");
    check(options_.top_k >= 0 && options_.every_steps >= 0, "ModelCheckpoint: top_k and every_steps must be >= 0");
  }

  void on_fit_start(TrainerView& view) {
    view.configure_checkpoints({.directory = options_.directory,
                                .every_steps = 0,
                                .every_epochs = 0,
                                .keep_last = 1,
                                .best_metric = options_.monitor.name,
                                .best_is = options_.monitor.mode,
                                .save_on_preemption = options_.save_on_preemption,
                                .keep_best = options_.monitor.name.empty() ? 0 : options_.top_k});
  }
  void on_step_end(TrainerView& view, std::int64_t step) {
    if (options_.every_steps > 0 && step % options_.every_steps == 0) last_ = view.save_checkpoint(std::nan(""));
  }
  void on_validation_end(TrainerView& view, const ValidationResult& r) {
    if (ranks_on_validation()) last_ = view.save_checkpoint(monitored_value(r, options_.monitor.name));
  }
  void on_train_epoch_end(TrainerView& view, const EpochResult& r) {
    if (!options_.monitor.name.empty()) options_.monitor.check_measured("ModelCheckpoint", r);
    if (!ranks_on_validation())
      last_ = view.save_checkpoint(options_.monitor.name.empty() ? std::nan("") : monitored_value(r, options_.monitor.name));
  }

  // The checkpoint saved last (empty before the first).
  const std::filesystem::path& last_saved() const { return last_; }

 private:
  bool ranks_on_validation() const { return !options_.monitor.name.empty() && options_.monitor.on_validation(); }

  ModelCheckpointOptions options_;
  std::filesystem::path last_;
};

}  // namespace ptrain
