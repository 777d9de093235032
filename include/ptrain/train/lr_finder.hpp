#pragma once
// The learning-rate range test (Leslie Smith; fastai's lr_find, Lightning's Tuner.lr_find): train
// for `steps` batches while the rate grows exponentially from min_lr to max_lr, record the loss,
// then put everything back and suggest the rate where the smoothed loss fell fastest.
//
//   Trainer<Net> trainer(model, sgd, options);
//   LrFinderResult found = find_lr(trainer, train_loader, {.csv = "lr.csv", .plot = "lr.png"});
//   if (found.suggestion) trainer.set_lr(*found.suggestion);
//   trainer.fit(train_loader, &val_loader, epochs);
//
// - Smoothing is fastai's moving average, avg = beta * avg + (1 - beta) * loss, smoothed =
//   avg / (1 - beta^(i+1)) (bias-corrected, so the first points are not pulled to 0), but with
//   beta = 0.9 rather than fastai's and Lightning's 0.98: the average lags beta / (1 - beta) steps,
//   49 at 0.98, half of a 100-step sweep and four of its eight decades, which puts the steepest
//   fall of the smoothed curve decades above the rates where the loss really fell; at 0.9 the lag
//   is 9 steps (0.7 of a decade).
// - The sweep stops early when the smoothed loss exceeds `divergence` (4) times the best so far, or
//   the loss is not finite; the point that diverged is recorded. A Trainer with terminate_on_nan
//   (the default) throws at a non-finite step and cannot step again after it (the step's loss
//   stays in its sums), so there the finder restores what it saved and throws, saying so: a sweep
//   that may jump straight to inf wants a Trainer made with terminate_on_nan = false.
// - The suggestion is Lightning's: the steepest negative slope of the smoothed loss against
//   log10(lr), by central differences, leaving out the first tenth of the points (the smoothing
//   warms up there) and the last (it may be the divergence).
// - Restored bit for bit afterwards: the parameters and buffers (16-bit models' float ones too),
//   the optimizer's state (momentum or moment buffers, rates: Trainer::remember_optimizer, through
//   its state()/load_state()),
//   the global generator and the model's own generators, and the modules' train/eval mode. The
//   gradients are left zeroed.
// - Not restored, because the Trainer does not let them be written: its global_step() (it has
//   advanced by the batches trained), skipped_steps(), the policies' state (a dynamic loss scale)
//   and the loader's position; a Trainer writing TensorBoard logs each step logs the sweep's steps.
//   Run the finder before fit, as Lightning's Tuner does, and attach step callbacks (schedules)
//   after it: one would set the rate over the sweep's. With accumulation_steps k, the optimizer
//   steps every k batches and the rate changes every batch.
// - One process: each rank would stop on its own loss. The CSV and the plot are written by the
//   main rank (trainer.is_main()); the plot needs ptrain::image (PTRAIN_HAS_IMAGE), and without it
//   plot_written is false and only the CSV is written.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iomanip>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/io/atomic_file.hpp"
#include "ptrain/io/line_plot.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/tensor/tensor.hpp"
#ifdef PTRAIN_HAS_IMAGE
#include "ptrain/io/image.hpp"
#endif

namespace ptrain {

struct LrFinderOptions {
  double min_lr = 1e-7;
  double max_lr = 10;
  std::int64_t steps = 100;  // batches; the loader is cycled when it has fewer
  double smoothing = 0.9;    // beta of the exponential moving average; 0 leaves the loss as it is
  double divergence = 4;     // stop when the smoothed loss exceeds this times the best
  std::filesystem::path csv;   // lr,loss,smoothed_loss per step; empty: not written
  std::filesystem::path plot;  // PNG: smoothed loss (and the raw loss in grey) over log10(lr); empty: none
};

struct LrFinderPoint {
  double lr, loss, smoothed_loss;
};

struct LrFinderResult {
  std::vector<LrFinderPoint> points;  // one per batch trained, at most options.steps
  std::optional<double> suggestion;   // empty when too few points were recorded to have a slope
  bool diverged = false;              // stopped before the last step
  bool plot_written = false;
};

namespace detail {

// Everything the sweep changes that find_lr puts back (see the header's list).
template <class Model>
class LrFinderSnapshot {
 public:
  LrFinderSnapshot(Model& model, std::function<void()> restore_optimizer)
      : model_(model), restore_optimizer_(std::move(restore_optimizer)), global_rng_(global_rng()) {
    for (auto& [name, p] : model.named_parameters()) parameters_.push_back(p.value().clone());
    for (auto& [name, p] : model.named_float_parameters()) float_parameters_.push_back(p.value().clone());
    for (auto& [name, b] : model.named_buffers()) buffers_.push_back(b->clone());
    for (auto& [name, b] : model.named_float_buffers()) float_buffers_.push_back(b->clone());
    for (auto& [name, rng] : model.named_generators()) generators_.push_back(*rng);
    for (auto& [name, m] : model.named_modules()) training_.push_back(m->is_training());
  }
  LrFinderSnapshot(const LrFinderSnapshot&) = delete;
  LrFinderSnapshot& operator=(const LrFinderSnapshot&) = delete;
  ~LrFinderSnapshot() {
    std::size_t i = 0;
    for (auto& [name, p] : model_.named_parameters()) p.value().copy_from(parameters_[i++]);
    i = 0;
    for (auto& [name, p] : model_.named_float_parameters()) p.value().copy_from(float_parameters_[i++]);
    i = 0;
    for (auto& [name, b] : model_.named_buffers()) b->copy_from(buffers_[i++]);
    i = 0;
    for (auto& [name, b] : model_.named_float_buffers()) b->copy_from(float_buffers_[i++]);
    i = 0;
    for (auto& [name, rng] : model_.named_generators()) *rng = generators_[i++];
    i = 0;  // parents before children: each module ends in its own mode
    for (auto& [name, m] : model_.named_modules()) m->train(training_[i++]);
    global_rng() = global_rng_;
    restore_optimizer_();
    model_.zero_grad();
  }

 private:
  using T = typename Model::scalar_type;
  using D = typename Model::device_type;
  Model& model_;
  std::function<void()> restore_optimizer_;
  std::vector<Tensor<T, D>> parameters_, buffers_;
  std::vector<Tensor<float, D>> float_parameters_, float_buffers_;
  std::vector<Rng> generators_;
  std::vector<bool> training_;
  Rng global_rng_;
};

// The rate of step i of n, min_lr at the first and max_lr at the last.
inline double swept_lr(const LrFinderOptions& o, std::int64_t i) {
  if (o.steps == 1) return o.min_lr;
  return o.min_lr * std::pow(o.max_lr / o.min_lr, double(i) / double(o.steps - 1));
}

// The steepest fall of the smoothed loss against log10(lr), as in the header.
inline std::optional<double> steepest_fall(const std::vector<LrFinderPoint>& points, std::int64_t steps) {
  const std::size_t first = static_cast<std::size_t>(steps / 10);
  if (points.size() < first + 3) return std::nullopt;
  const std::size_t end = points.size() - 1;  // the last point left out
  std::optional<double> best_lr;
  double best_slope = 0;
  for (std::size_t i = first; i < end; ++i) {
    const std::size_t lo = i == first ? i : i - 1, hi = i + 1 == end ? i : i + 1;
    if (lo == hi) continue;
    const double slope = (points[hi].smoothed_loss - points[lo].smoothed_loss) /
                         (std::log10(points[hi].lr) - std::log10(points[lo].lr));
    if (std::isfinite(slope) && slope < best_slope) best_slope = slope, best_lr = points[i].lr;
  }
  return best_lr;
}

inline void write_lr_csv(const std::filesystem::path& path, const std::vector<LrFinderPoint>& points) {
  io::write_atomically(path, [&](std::ostream& out) {
    out << "lr,loss,smoothed_loss\n" << std::setprecision(9);
    for (const auto& p : points) out << p.lr << ',' << p.loss << ',' << p.smoothed_loss << '\n';
  });
}

inline bool write_lr_plot(const std::filesystem::path& path, const LrFinderResult& result) {
#ifdef PTRAIN_HAS_IMAGE
  io::LinePlot plot;
  for (const auto& p : result.points) {
    plot.x.push_back(p.lr);
    plot.y.push_back(p.smoothed_loss);
    plot.background.push_back(p.loss);
  }
  plot.marker_x = result.suggestion;
  io::write_png(path, io::render_line_plot(plot));
  return true;
#else
  (void)path, (void)result;
  return false;
#endif
}

}  // namespace detail

// The sweep described at the top, over trainer.train_step with the loader's batches, the rate set
// through trainer.set_lr.
template <class TrainerType, class L>
LrFinderResult find_lr(TrainerType& trainer, L& loader, const LrFinderOptions& options = {}) {
  using T = typename std::remove_cvref_t<decltype(trainer.model())>::scalar_type;
  check(options.min_lr > 0 && options.max_lr > options.min_lr && std::isfinite(options.max_lr), "find_lr: the sweep ",
        options.min_lr, " to ", options.max_lr, " needs 0 < min_lr < max_lr");
  check(options.steps > 0, "find_lr: steps must be positive, got ", options.steps);
  check(options.smoothing >= 0 && options.smoothing < 1, "find_lr: smoothing ", options.smoothing,
        " is not in [0, 1)");
  check(options.divergence > 1, "find_lr: divergence ", options.divergence, " must exceed 1");

  LrFinderResult result;
  {
    detail::LrFinderSnapshot snapshot(trainer.model(), trainer.remember_optimizer());
    trainer.model().train();
    double average = 0, best = std::numeric_limits<double>::infinity();
    std::int64_t step = 0;
    for (int pass = 0; step < options.steps && !result.diverged; ++pass) {
      if constexpr (requires { loader.set_epoch(pass); }) loader.set_epoch(pass);
      const std::int64_t before = step;
      for (const auto& batch : loader) {
        if (step == options.steps) break;
        const double lr = detail::swept_lr(options, step);
        trainer.set_lr(lr);
        double loss = std::numeric_limits<double>::quiet_NaN();
        try {
          if constexpr (requires { trainer.task().batch_targets(batch); })
            loss = trainer.train_step(tensor_cast<T>(batch.inputs), trainer.task().batch_targets(batch)).loss();
          else
            loss = trainer.train_step(tensor_cast<T>(batch.inputs), batch.targets).loss();
        } catch (const Error& e) {
          if (std::string(e.what()).find("terminate_on_nan") == std::string::npos) throw;
          fail("find_lr: at lr ", lr, " (step ", step + 1, " of the sweep) the loss or a gradient was not finite "
               "before the smoothed loss passed ", options.divergence, " times its best, and the Trainer stopped "
               "(TrainerOptions::terminate_on_nan), after which it cannot step again. Weights and optimizer are "
               "restored; run the finder with a Trainer made with terminate_on_nan = false, or a lower max_lr. "
               "The Trainer said: ", e.what());
        }
        ++step;
        average = options.smoothing * average + (1 - options.smoothing) * loss;
        const double smoothed = average / (1 - std::pow(options.smoothing, double(step)));
        result.points.push_back({lr, loss, smoothed});
        if (!std::isfinite(smoothed) || (step > 1 && smoothed > options.divergence * best)) {
          result.diverged = step < options.steps;
          break;
        }
        best = std::min(best, smoothed);
      }
      check(step > before, "find_lr: the loader gave no batch");
    }
  }
  result.suggestion = detail::steepest_fall(result.points, options.steps);
  if (trainer.is_main()) {
    if (!options.csv.empty()) detail::write_lr_csv(options.csv, result.points);
    if (!options.plot.empty()) result.plot_written = detail::write_lr_plot(options.plot, result);
  }
  return result;
}

}  // namespace ptrain
