#pragma once
// The examples' checkpoints (ptrain/train/checkpoint.hpp): --checkpoint-dir DIR saves one at
// every epoch's end (and every --checkpoint-every steps), and on SIGTERM or SIGUSR1 to any rank,
// after which every rank exits 0 (under Slurm the job is requeued); --resume continues from the
// newest checkpoint under DIR, --epochs staying the total, and continues the --csv log (the
// Trainer keeps its rows up to the checkpoint's epoch). A checkpoint of another model or a
// corrupt manifest ends the run with the file and the mismatch named, and nothing on disk changes.
// With --keep-top-k K, ModelCheckpoint keeps the K best by the example's metric and the newest.
#include <cstdio>
#include <string>

#include <ptrain/core/error.hpp>

#include "training_loop.hpp"
#include "cli.hpp"

namespace examples {

inline void add_checkpoint_options(Cli& cli) {
  cli.option("--checkpoint-dir", "", "directory of training checkpoints (step-N/), saved at each epoch's end and on "
                                     "SIGTERM/SIGUSR1 (empty: none)")
      .switch_option("--resume", "continue from the newest checkpoint in --checkpoint-dir (--epochs stays the total)")
      .integer_option("--checkpoint-every", 0, "also save a checkpoint every N optimizer steps (0: at epoch ends only)",
                      0);
}

// Whether the run stopped early for a preemption signal (after saving): the example exits 0.
inline bool& preempted_run() {
  static bool preempted = false;
  return preempted;
}

// Sets the trainer's checkpoints and callbacks up from the flags (common/training_loop.hpp),
// resumes if asked, prints the summary or runs the learning-rate finder on the train loader if
// asked, and runs fit() (the example's call of trainer.fit). Register a scheduler
// (trainer.checkpoint_scheduler) before. Returns what fit returned (nothing after the finder).
template <class Trainer, class Loader, class Fit>
auto fit_with_checkpoints(const Cli& cli, Trainer& trainer, Loader& train_loader, Fit&& fit) {
  if (!before_training(cli, trainer, train_loader)) return decltype(fit()){};
  const std::string dir = cli.str("--checkpoint-dir");
  ptrain::check(!cli.flag("--resume") || !dir.empty(), "--resume needs --checkpoint-dir DIR");
  const bool ranked = add_flagged_callbacks(cli, trainer, dir);
  if (!dir.empty()) {
    if (!ranked) trainer.save_checkpoints({.directory = dir, .every_steps = cli.integer("--checkpoint-every")});
    if (cli.flag("--resume") && !trainer.resume_latest(dir) && trainer.is_main())
      std::printf("%s: no checkpoint under %s yet: starting from the first epoch\n", cli.program().c_str(), dir.c_str());
  }
  auto results = fit();
  preempted_run() = trainer.preempted();
  if (trainer.stopped_early() && trainer.is_main())
    std::printf("%s: stopped early: %s\n", cli.program().c_str(), trainer.stop_reason().c_str());
  return results;
}

}  // namespace examples
