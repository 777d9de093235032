#pragma once
// What a Trainer is told (TrainerOptions) and what each of its epochs gives back (EpochResult).
#include <cmath>
#include <cstdint>
#include <string>

#include "ptrain/core/error.hpp"
#include "ptrain/tasks/task.hpp"

namespace ptrain {

struct TrainerOptions {
  std::string csv_log;        // one row per epoch; empty for none
  bool progress_bar = true;   // drawn only when stdout is a terminal
  bool print_epochs = true;   // one line per epoch
  int accumulation_steps = 1;  // batches whose gradients add up before one optimizer step
  // > 0: fit also validates every N optimizer steps inside an epoch (Lightning's
  // val_check_interval), besides at each epoch's end; the callbacks see each validation and the
  // TensorBoard file gets val_step/loss and val_step/<metric> at the step. 0: at epoch ends only.
  std::int64_t val_every_steps = 0;
  // > 0: each validation inside fit reads only the loader's first N batches on every rank
  // (Lightning's limit_val_batches as a count); evaluate() called directly reads them all. 0: all.
  std::int64_t limit_val_batches = 0;
  // > 0: clip the gradients the optimizer steps to this global L2 norm before each step (PyTorch's
  // clip_grad_norm_, train/clip_grad_norm.hpp): averaged over data-parallel replicas, unscaled by
  // mixed precision, the norm taken over every pipeline stage and Sharded rank. 0: no clipping.
  double clip_grad_norm = 0;
  // A step whose loss or gradients hold inf or NaN: true ends training with an Error naming the
  // step, epoch, rank and first such parameter (Lightning's Trainer(terminate_on_nan=True), on by
  // default here); false skips the optimizer step and counts it in skipped_steps() (DeepSpeed's
  // engine.skipped_steps), as an fp16 overflow is skipped. Checked after the policies'
  // before_optimizer_step, so on averaged gradients (every data-parallel rank decides alike); a step
  // a policy skipped (MixedPrecision's overflow, which halves the loss scale) stops only for a
  // non-finite loss.
  bool terminate_on_nan = true;
  // A TensorBoard run directory (io/tensorboard.hpp), written by the main rank; empty for none. Per
  // step (x = global step): step/loss (the main rank's batches; none where it computes no loss, a
  // pipeline's first stage), step/lr, step/loss_scale, step/images_per_second (the main rank's
  // samples, where it sees them); per epoch (x = epoch): train/loss, train/<metric>,
  // val/loss, val/<metric>, epoch/lr, epoch/loss_scale, epoch/images_per_second (every rank's).
  std::string tensorboard;
  // A Chrome trace JSON file (core/timeline.hpp) of every rank's steps, rewritten by the main rank
  // after each epoch; empty for none. Every rank must be given it alike: the ranks' spans meet on
  // the main rank through the policies' reduce point.
  std::string timeline;
};

inline void check_trainer_options(const TrainerOptions& options) {
  check(options.accumulation_steps >= 1, "Trainer: accumulation_steps must be at least 1, got ",
        options.accumulation_steps);
  check(options.val_every_steps >= 0, "Trainer: val_every_steps must be >= 0 (0: validate at epoch ends only), got ",
        options.val_every_steps);
  check(options.limit_val_batches >= 0, "Trainer: limit_val_batches must be >= 0 (0: every batch), got ",
        options.limit_val_batches);
  check(options.clip_grad_norm >= 0 && std::isfinite(options.clip_grad_norm), "Trainer: clip_grad_norm ",
        options.clip_grad_norm, " (expected 0 for none, or a positive norm)");
}

// The task's metrics by name: result.train.at("accuracy"), result.val.at("mean_iou").
struct EpochResult {
  int epoch = 0;
  double train_loss = 0;
  double val_loss = std::nan("");
  MetricValues train, val;  // val is empty without a validation loader
  double images_per_second = 0, seconds = 0, lr = 0;
};

}  // namespace ptrain
