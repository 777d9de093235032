#pragma once
// Segmentation: a class per pixel. Targets are a host Tensor<std::int64_t> [N, H, W] (or
// [N, d1, ...]); the loss is per-pixel cross entropy over scores [N, C, H, W], or, for two
// classes, binary cross entropy with logits over one logit per pixel [N, 1, H, W] (foreground
// where the logit is positive). The metrics come from a ConfusionMatrix summed over the epoch:
// "pixel_accuracy", "mean_iou", "mean_dice" and each class's "iou_<c>" and "dice_<c>".
//
//   Trainer<UNet<float>, Segmentation> t(model, adam, {}, Segmentation{.classes = 2});
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/autograd/ops/scale_gradient.hpp"
#include "ptrain/tasks/metrics.hpp"

namespace ptrain {

enum class SegmentationLoss { cross_entropy, bce_with_logits };

struct Segmentation {
  using target_type = Tensor<std::int64_t>;
  std::int64_t classes = 2;
  SegmentationLoss criterion = SegmentationLoss::cross_entropy;

  std::int64_t rows(const target_type& targets) const {
    check(targets.rank() >= 1, "Segmentation: targets of shape ", targets.shape(), "; expected [N, H, W]");
    return targets.size(0);
  }
  target_type slice(const target_type& targets, std::int64_t begin, std::int64_t end) const {
    return targets.slice(begin, end);
  }
  double loss_weight(const target_type& targets) const { return static_cast<double>(targets.numel()); }

  // A loader's batch: its target maps, flattened, with their shape.
  template <class Batch>
    requires requires(const Batch& b) { target_type::from(b.target_shape, b.targets); }
  target_type batch_targets(const Batch& batch) const {
    return target_type::from(batch.target_shape, batch.targets);
  }

  template <class T, class D>
  Var<T, D> loss(const Var<T, D>& output, const target_type& targets, double grad_scale) const {
    if (criterion == SegmentationLoss::cross_entropy)
      return cross_entropy(output, pixels(targets), 0.0, grad_scale);
    check_one_logit_per_pixel(output.shape(), targets);
    Tensor<T> foreground(output.shape());
    const auto classes_of = pixels(targets);
    for (std::size_t i = 0; i < classes_of.size(); ++i) {
      check(classes_of[i] == 0 || classes_of[i] == 1, "Segmentation (bce_with_logits): target ", classes_of[i],
            " at pixel ", i, "; expected 0 or 1");
      foreground.data()[i] = static_cast<T>(classes_of[i]);
    }
    return binary_cross_entropy_with_logits(scale_gradient(output, grad_scale), Var<T, D>(on_device<D>(foreground)));
  }

  // The confusion matrix, row-major.
  std::size_t state_size() const { return static_cast<std::size_t>(classes * classes); }
  template <class T, class D>
  void accumulate(const Tensor<T, D>& scores, const target_type& targets, double, std::span<double> state) const {
    ConfusionMatrix counts(classes);
    if (criterion == SegmentationLoss::cross_entropy) {
      counts.update(scores, pixels(targets));
    } else {
      check_one_logit_per_pixel(scores.shape(), targets);
      const Tensor<T> logits = on_host(scores);
      std::vector<std::int64_t> predicted(static_cast<std::size_t>(logits.numel()));
      for (std::size_t i = 0; i < predicted.size(); ++i) predicted[i] = static_cast<double>(logits.data()[i]) > 0;
      counts.update(std::span<const std::int64_t>(predicted), pixels(targets));
    }
    for (std::size_t i = 0; i < state.size(); ++i) state[i] += static_cast<double>(counts.counts()[i]);
  }

  std::vector<std::string> metric_names() const {
    std::vector<std::string> names{"pixel_accuracy", "mean_iou", "mean_dice"};
    for (const char* score : {"iou_", "dice_"})
      for (std::int64_t c = 0; c < classes; ++c) names.push_back(score + std::to_string(c));
    return names;
  }
  std::vector<double> metric_values(std::span<const double> state) const {
    const ConfusionMatrix m = ConfusionMatrix::from_counts(classes, state);
    std::vector<double> values{m.accuracy(), m.mean_iou(), m.mean_dice()};
    for (const auto& per_class : {m.iou(), m.dice()}) values.insert(values.end(), per_class.begin(), per_class.end());
    return values;
  }

 private:
  static std::span<const std::int64_t> pixels(const target_type& targets) {
    return {targets.data(), static_cast<std::size_t>(targets.numel())};
  }
  void check_one_logit_per_pixel(const Shape& logits, const target_type& targets) const {
    check(classes == 2, "Segmentation: bce_with_logits scores two classes; classes is ", classes);
    check(logits.rank() >= 2 && logits[1] == 1 && logits.numel() == targets.numel(), "Segmentation (bce_with_logits): ",
          "logits of shape ", logits, " for targets of shape ", targets.shape(), "; expected one logit per pixel, [N, 1, ...]");
  }
};

}  // namespace ptrain
