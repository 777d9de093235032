#pragma once
// What the main rank writes of a run: the line per epoch, the CSV log (a row per epoch) and the
// TensorBoard event file (scalars per step and per epoch), as TrainerOptions asks. Built and
// called on the main rank only.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "ptrain/core/log.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/io/csv_log.hpp"
#include "ptrain/io/tensorboard.hpp"
#include "ptrain/train/trainer_options.hpp"

namespace ptrain::detail {

class RunLogs {
 public:
  RunLogs(const TrainerOptions& options, std::vector<std::string> metric_names);

  // A resumed run: the CSV log keeps the rows up to the checkpoint's epoch and goes on from there.
  void continue_after(std::int64_t epoch) {
    if (csv_) csv_->continue_after(epoch);
  }

  // Whether step() writes anything and the loss scale is recorded (the TensorBoard file's
  // scalars); without, the Trainer asks the policies for neither.
  bool writes_tensorboard() const { return tensorboard_.has_value(); }

  // loss: none where this rank computes no loss (a pipeline's first stage); samples: the rank's.
  void step(std::int64_t step, std::optional<double> loss, double lr, double loss_scale, double samples,
            double seconds);

  // A validation inside an epoch (TrainerOptions::val_every_steps): a line, and TensorBoard's
  // val_step/ scalars at the step.
  void validation(std::int64_t step, double loss, const MetricValues& metrics);

  void epoch(const EpochResult& r, int epochs, double loss_scale);

 private:
  static std::string metrics_text(const std::string& prefix, const MetricValues& m);

  std::vector<std::string> metric_names_;
  bool print_epochs_ = true;
  std::optional<io::CsvLog> csv_;
  std::optional<io::EventWriter> tensorboard_;
};

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE RunLogs::RunLogs(const TrainerOptions& options, std::vector<std::string> metric_names)
    : metric_names_(std::move(metric_names)), print_epochs_(options.print_epochs) {
  if (!options.csv_log.empty()) {
    std::vector<std::string> header{"epoch", "train_loss"};
    for (const auto& name : metric_names_) header.push_back("train_" + name);
    header.push_back("val_loss");
    for (const auto& name : metric_names_) header.push_back("val_" + name);
    for (const char* name : {"images_per_second", "seconds", "lr"}) header.push_back(name);
    csv_.emplace(options.csv_log, std::move(header));
  }
  if (!options.tensorboard.empty()) tensorboard_.emplace(options.tensorboard);
}

PTRAIN_PREBUILT_INLINE void RunLogs::step(std::int64_t step, std::optional<double> loss, double lr, double loss_scale,
                                          double samples, double seconds) {
  if (!tensorboard_) return;
  if (loss) tensorboard_->add_scalar("step/loss", *loss, step);
  tensorboard_->add_scalar("step/lr", lr, step);
  tensorboard_->add_scalar("step/loss_scale", loss_scale, step);
  if (samples > 0 && seconds > 0) tensorboard_->add_scalar("step/images_per_second", samples / seconds, step);
}

PTRAIN_PREBUILT_INLINE void RunLogs::validation(std::int64_t step, double loss, const MetricValues& metrics) {
  if (print_epochs_) {
    char line[96];
    std::snprintf(line, sizeof line, "step %lld val_loss %.4f", static_cast<long long>(step), loss);
    log_line(line + metrics_text("val_", metrics));
  }
  if (!tensorboard_) return;
  tensorboard_->add_scalar("val_step/loss", loss, step);
  for (std::size_t i = 0; i < metrics.names.size(); ++i)
    tensorboard_->add_scalar("val_step/" + metrics.names[i], metrics.values[i], step);
  tensorboard_->flush();
}

PTRAIN_PREBUILT_INLINE void RunLogs::epoch(const EpochResult& r, int epochs, double loss_scale) {
  if (print_epochs_) {
    char line[256];
    std::snprintf(line, sizeof line, "epoch %d/%d loss %.4f", r.epoch, epochs, r.train_loss);
    std::string text = line + metrics_text("", r.train);
    if (!r.val.empty()) {
      std::snprintf(line, sizeof line, " val_loss %.4f", r.val_loss);
      text += line + metrics_text("val_", r.val);
    }
    std::snprintf(line, sizeof line, " %.1f img/s %.1fs lr %.3g", r.images_per_second, r.seconds, r.lr);
    log_line(text + line);
  }
  if (csv_) {
    // Without validation its columns hold NaN.
    const std::vector<double> val =
        r.val.empty() ? std::vector<double>(metric_names_.size(), std::nan("")) : r.val.values;
    std::vector<double> row{double(r.epoch), r.train_loss};
    row.insert(row.end(), r.train.values.begin(), r.train.values.end());
    row.push_back(r.val_loss);
    row.insert(row.end(), val.begin(), val.end());
    for (double v : {r.images_per_second, r.seconds, r.lr}) row.push_back(v);
    csv_->append(row);
  }
  if (tensorboard_) {
    const auto add_metrics = [&](const std::string& prefix, const MetricValues& m) {
      for (std::size_t i = 0; i < m.names.size(); ++i) tensorboard_->add_scalar(prefix + m.names[i], m.values[i], r.epoch);
    };
    tensorboard_->add_scalar("train/loss", r.train_loss, r.epoch);
    add_metrics("train/", r.train);
    if (!r.val.empty()) {
      tensorboard_->add_scalar("val/loss", r.val_loss, r.epoch);
      add_metrics("val/", r.val);
    }
    tensorboard_->add_scalar("epoch/lr", r.lr, r.epoch);
    tensorboard_->add_scalar("epoch/loss_scale", loss_scale, r.epoch);
    tensorboard_->add_scalar("epoch/images_per_second", r.images_per_second, r.epoch);
    tensorboard_->flush();
  }
}

PTRAIN_PREBUILT_INLINE std::string RunLogs::metrics_text(const std::string& prefix, const MetricValues& m) {
  std::string text;
  char value[64];
  for (std::size_t i = 0; i < m.names.size(); ++i) {
    std::snprintf(value, sizeof value, " %.4f", m.values[i]);
    text += " " + prefix + m.names[i] + value;
  }
  return text;
}
#endif

}  // namespace ptrain::detail
