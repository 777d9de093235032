#pragma once
// The training-loop flags every example takes, beside its checkpoints (common/checkpoints.hpp):
//   --val-every N             validate every N optimizer steps too (TrainerOptions::val_every_steps)
//   --limit-val-batches N     validate on the validation loader's first N batches only
//                             (TrainerOptions::limit_val_batches)
//   --accumulate N            add N batches' gradients before each optimizer step
//   --early-stop-patience N   stop when the example's metric has not improved for N validations
//   --early-stop-min-delta X  (what counts as an improvement)
//   --keep-top-k K            keep the K best checkpoints by the metric and the newest (--checkpoint-dir)
//   --ema DECAY               validate and checkpoint an exponential moving average of the weights
//   --summary                 print the model's summary (nn/summary.hpp) at the first batch, then train
//   --lr-find                 run the learning-rate finder (train/lr_finder.hpp), print its
//                             suggestion, write its curve as CSV and PNG, and exit
//   --activation-checkpointing  recompute each block's activations in backward instead of keeping
//                             them (nn/checkpoint_blocks.hpp: ResNet's residual blocks, a transformer's
//                             layers; a stack of single layers: each with parameters); a model that is
//                             not a Sequential (UNet) is refused
// The metric is the example's own (run.hpp's FinalMetric: test accuracy, perplexity, IoU).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <concepts>
#include <string>
#include <vector>
#include <type_traits>

#include <ptrain/core/error.hpp>
#include <ptrain/launch/process_info.hpp>
#include <ptrain/nn/checkpoint_blocks.hpp>
#include <ptrain/nn/summary.hpp>
#include <ptrain/tensor/tensor.hpp>
#include <ptrain/train/callbacks/early_stopping.hpp>
#include <ptrain/train/callbacks/model_checkpoint.hpp>
#include <ptrain/train/callbacks/weight_ema.hpp>
#include <ptrain/train/lr_finder.hpp>
#include <ptrain/train/trainer_options.hpp>

#include "cli.hpp"

namespace examples {

// The metric the callbacks watch: the example's, by the name the CSV log gives it.
inline ptrain::Monitor& example_monitor() {
  static ptrain::Monitor monitor;
  return monitor;
}

inline void add_callback_options(Cli& cli) {
  cli.integer_option("--val-every", 0, "also validate every N optimizer steps inside an epoch (0: at epoch ends only)", 0)
      .integer_option("--limit-val-batches", 0,
                      "validate on the first N batches of the validation set only, every rank (0: all of them)", 0)
      .integer_option("--accumulate", 1, "batches whose gradients add up before one optimizer step", 1, 4096)
      .integer_option("--early-stop-patience", 0,
                      "stop when the example's metric has not improved for N validations in a row (0: never)", 0)
      .real_option("--early-stop-min-delta", "0", "the least change of the metric that counts as an improvement")
      .integer_option("--keep-top-k", 0,
                      "keep the K best checkpoints by the example's metric, and the newest (needs --checkpoint-dir; "
                      "0: the newest two)",
                      0)
      .real_option("--ema", "0",
                   "keep an exponential moving average of the weights with this decay (0.999), validated and "
                   "checkpointed in their place (0: none)",
                   0, 0.999999)
      .switch_option("--summary",
                     "print each layer's output shape, parameters, FLOPs per sample and activation memory at the "
                     "first batch, with totals, before training")
      .switch_option("--lr-find",
                     "run the learning-rate range test (100 steps from 1e-7 to 10, one process), print the suggested "
                     "rate, write the curve as PROGRAM_lr_find.csv and .png (beside --csv when given) and exit")
      .switch_option("--activation-checkpointing",
                     "keep only each block's input and recompute its activations in backward: less memory, about a "
                     "third more time (ResNet's residual blocks, a transformer's layers)");
}

// Whether the run was the learning-rate finder's (the example exits 0 after it, without a floor).
inline bool& lr_find_run() {
  static bool finder = false;
  return finder;
}

// The TrainerOptions the flags set: accumulation and validation inside epochs.
inline void set_loop_options(const Cli& cli, ptrain::TrainerOptions& options) {
  options.accumulation_steps = static_cast<int>(cli.integer("--accumulate"));
  options.val_every_steps = cli.integer("--val-every");
  options.limit_val_batches = cli.integer("--limit-val-batches");
}

// --summary and --lr-find, at the train loader's first batch. Returns false when the run ends here
// (the finder's).
template <class Trainer, class Loader>
bool before_training(const Cli& cli, Trainer& trainer, Loader& loader) {
  using T = typename Trainer::T;
  if (cli.flag("--activation-checkpointing")) {
    auto& model = trainer.model();
    using Model = std::remove_cvref_t<decltype(model)>;
    if constexpr (std::derived_from<Model, ptrain::Sequential<T, typename Trainer::D>>) {
      std::size_t blocks = ptrain::checkpoint_blocks(model);
      const char* what = "blocks";
      if (blocks == 0) {  // a stack of single layers (the small CNN): each layer with parameters
        std::vector<ptrain::Rng*> generators;
        for (const auto& [name, rng] : model.named_generators()) generators.push_back(rng);
        for (const auto& [name, child] : model.children())
          if (!child->parameters().empty()) child->checkpoint_activations(true, generators), ++blocks;
        what = "layers";
      }
      if (trainer.is_main())
        std::printf("%s: activation checkpointing on %zu %s\n", cli.program().c_str(), blocks, what);
    } else {
      ptrain::fail("--activation-checkpointing: ", model.type_name(),
                   " is not a Sequential, so its blocks are not found (checkpoint its modules with "
                   "Module::checkpoint_activations in code)");
    }
  }
  if (cli.flag("--summary")) {
    bool printed = false;
    for (const auto& batch : loader) {
      trainer.with_whole_model([&](auto& model) {
        const ptrain::ModelSummary summary = ptrain::summarize(model, ptrain::tensor_cast<T>(batch.inputs));
        if (trainer.is_main()) ptrain::print_summary(summary, std::cout);
      });
      printed = true;
      break;
    }
    ptrain::check(printed, "--summary: the training loader gave no batch");
  }
  if (!cli.flag("--lr-find")) return true;
  ptrain::check(ptrain::detect_process_info().world_size == 1,
                "--lr-find runs on one process (each rank would stop the sweep on its own loss); start it without "
                "mpiexec");
  const std::string csv = cli.str("--csv");
  const std::filesystem::path stem =
      csv.empty() ? std::filesystem::path(cli.program() + "_lr_find")
                  : std::filesystem::path(csv).replace_filename(std::filesystem::path(csv).stem().string() + "_lr_find");
  const ptrain::LrFinderResult found = ptrain::find_lr(
      trainer, loader, {.csv = stem.string() + ".csv", .plot = stem.string() + ".png"});
  std::printf("%s: learning-rate finder: %zu steps from %.3g to %.3g%s; curve in %s.csv%s\n", cli.program().c_str(),
              found.points.size(), found.points.empty() ? 0.0 : found.points.front().lr,
              found.points.empty() ? 0.0 : found.points.back().lr, found.diverged ? " (the loss diverged there)" : "",
              stem.string().c_str(), found.plot_written ? (", plot in " + stem.string() + ".png").c_str() : "");
  if (found.suggestion)
    std::printf("%s: suggested learning rate %.3g\n", cli.program().c_str(), *found.suggestion);
  else
    std::printf("%s: no suggestion: too few steps before the loss diverged\n", cli.program().c_str());
  lr_find_run() = true;
  return false;
}

// Adds the callbacks the flags ask for; returns whether checkpoints are kept by the metric
// (ModelCheckpoint then saves them, instead of Trainer::save_checkpoints).
template <class Trainer>
bool add_flagged_callbacks(const Cli& cli, Trainer& trainer, const std::string& checkpoint_dir) {
  ptrain::Monitor monitor = example_monitor();
  monitor.min_delta = cli.real("--early-stop-min-delta");
  // First, so that validation runs on the averages and the callbacks after it see their metric.
  if (const double decay = cli.real("--ema"); decay > 0)
    trainer.add_callback(
        ptrain::WeightEma<typename Trainer::T, typename Trainer::D>(trainer.local_model(), decay));
  if (const long patience = cli.integer("--early-stop-patience"); patience > 0)
    trainer.add_callback(ptrain::EarlyStopping({.monitor = monitor, .patience = static_cast<int>(patience)}));
  const long top_k = cli.integer("--keep-top-k");
  if (top_k == 0) return false;
  ptrain::check(!checkpoint_dir.empty(), "--keep-top-k needs --checkpoint-dir DIR");
  trainer.add_callback(ptrain::ModelCheckpoint({.directory = checkpoint_dir,
                                                .monitor = monitor,
                                                .top_k = static_cast<int>(top_k),
                                                .every_steps = cli.integer("--checkpoint-every")}));
  return true;
}

}  // namespace examples
