#pragma once
// Evaluation metrics kept as counts: top-k accuracy, and a confusion matrix with the
// segmentation scores derived from it (IoU, Dice). Each rank counts its own shard of the data;
// reduced(comm) sums the counts over the ranks of a Communicator.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ptrain/autograd/detail/class_layout.hpp"
#include "ptrain/autograd/ops/accuracy.hpp"
#include "ptrain/comm/communicator.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

namespace detail {

// Sums counts over the ranks. Communicators carry floating-point elements, so the counts travel
// as doubles, which hold integers exactly below 2^53: each rank's count is checked to keep the
// sum below that.
template <Communicator C>
void allreduce_counts(C& comm, std::vector<std::int64_t>& counts, const char* metric) {
  const std::int64_t limit = (std::int64_t(1) << 53) / comm.size();
  std::vector<double> sums(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    check(counts[i] >= 0 && counts[i] < limit, metric, ": count ", counts[i], " on rank ", comm.rank(),
          " is too large to sum exactly over ", comm.size(), " ranks");
    sums[i] = static_cast<double>(counts[i]);
  }
  comm.allreduce_sum(std::span<double>(sums));
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<std::int64_t>(sums[i]);
}

inline double ratio(std::int64_t numerator, std::int64_t denominator) {
  return denominator > 0 ? static_cast<double>(numerator) / static_cast<double>(denominator)
                         : std::numeric_limits<double>::quiet_NaN();
}

// The mean of the values that are not NaN (classes present in neither targets nor predictions).
inline double mean_of_present(const std::vector<double>& values) {
  double sum = 0;
  int n = 0;
  for (double v : values)
    if (!std::isnan(v)) sum += v, ++n;
  return n ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace detail

// Top-k accuracy for several k at once. The target's rank among the scores counts the classes
// scoring higher, and those scoring the same with a smaller index (torch.argmax's tie rule), so
// top-1 agrees with top1_correct. A k at or above the class count counts every position.
class TopKAccuracy {
 public:
  explicit TopKAccuracy(std::vector<int> ks = {1, 5}) : ks_(std::move(ks)), correct_(ks_.size(), 0) {
    check(!ks_.empty(), "TopKAccuracy: no k given");
    for (int k : ks_) check(k >= 1, "TopKAccuracy: k must be at least 1, got ", k);
  }

  // scores [N, C] or [N, C, d1, ...] with one target per position (the layout of the losses), on
  // any device.
  template <class T, class D>
  void update(const Tensor<T, D>& scores, std::span<const std::int64_t> targets) {
    const auto l = detail::class_layout(scores.shape(), targets, "TopKAccuracy");
    const Tensor<T> host = on_host(scores);
    const T* x = host.data();
    for (std::int64_t o = 0; o < l.outer; ++o)
      for (std::int64_t k = 0; k < l.inner; ++k) {
        const T* s = x + o * l.n * l.inner + k;
        const std::int64_t target = targets[static_cast<std::size_t>(o * l.inner + k)];
        const T target_score = s[target * l.inner];
        std::int64_t rank = 0;
        for (std::int64_t c = 0; c < l.n; ++c) {
          const T v = s[c * l.inner];
          rank += kernels::ranks_above(v, target_score) || (!kernels::ranks_above(target_score, v) && c < target);
        }
        for (std::size_t i = 0; i < ks_.size(); ++i) correct_[i] += rank < ks_[i];
      }
    samples_ += l.outer * l.inner;
  }
  template <class T, class D>
  void update(const Var<T, D>& scores, std::span<const std::int64_t> targets) {
    update(scores.value(), targets);
  }

  const std::vector<int>& ks() const { return ks_; }
  std::int64_t samples() const { return samples_; }
  std::int64_t correct(int k) const { return correct_[index(k)]; }
  double accuracy(int k) const { return detail::ratio(correct(k), samples_); }

  // The counts summed over every rank of comm (a collective: every rank calls it).
  template <Communicator C>
  TopKAccuracy reduced(C& comm) const {
    TopKAccuracy out = *this;
    std::vector<std::int64_t> counts = correct_;
    counts.push_back(samples_);
    detail::allreduce_counts(comm, counts, "TopKAccuracy");
    out.samples_ = counts.back();
    counts.pop_back();
    out.correct_ = counts;
    return out;
  }
  void reset() {
    std::fill(correct_.begin(), correct_.end(), 0);
    samples_ = 0;
  }

 private:
  std::size_t index(int k) const {
    for (std::size_t i = 0; i < ks_.size(); ++i)
      if (ks_[i] == k) return i;
    fail("TopKAccuracy: k = ", k, " is not counted; give it to the constructor");
  }

  std::vector<int> ks_;
  std::vector<std::int64_t> correct_;
  std::int64_t samples_ = 0;
};

// A num_classes x num_classes matrix of counts, rows the target class and columns the predicted
// one (as sklearn and torchmetrics). Positions whose target is ignore_index (255, the void label
// of segmentation sets) are not counted.
class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(std::int64_t num_classes, std::optional<std::int64_t> ignore_index = std::nullopt)
      : classes_(num_classes), ignore_(ignore_index) {
    check(num_classes >= 1, "ConfusionMatrix: num_classes must be at least 1, got ", num_classes);
    counts_.assign(static_cast<std::size_t>(num_classes * num_classes), 0);
  }

  void update(std::span<const std::int64_t> predicted, std::span<const std::int64_t> targets) {
    check(predicted.size() == targets.size(), "ConfusionMatrix: ", predicted.size(), " predictions for ",
          targets.size(), " targets");
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (ignore_ && targets[i] == *ignore_) continue;
      check(0 <= targets[i] && targets[i] < classes_, "ConfusionMatrix: target ", targets[i], " at index ", i,
            " is out of range for ", classes_, " classes", ignore_ ? " (and is not the ignore_index)" : "");
      check(0 <= predicted[i] && predicted[i] < classes_, "ConfusionMatrix: prediction ", predicted[i],
            " at index ", i, " is out of range for ", classes_, " classes");
      ++counts_[static_cast<std::size_t>(targets[i] * classes_ + predicted[i])];
    }
  }
  // Predictions are the highest-scoring classes of scores [N, C] or [N, C, d1, ...], on any device.
  template <class T, class D>
  void update(const Tensor<T, D>& scores, std::span<const std::int64_t> targets) {
    check(scores.rank() >= 2 && scores.size(1) == classes_, "ConfusionMatrix: scores of shape ", scores.shape(),
          " for ", classes_, " classes; expected [N, ", classes_, "] or [N, ", classes_, ", d1, ...]");
    const auto predicted = argmax_classes(on_host(scores));
    check(predicted.size() == targets.size(), "ConfusionMatrix: ", targets.size(), " targets for scores of shape ",
          scores.shape(), ", which need ", predicted.size(), " (one per position)");
    update(std::span<const std::int64_t>(predicted), targets);
  }
  template <class T, class D>
  void update(const Var<T, D>& scores, std::span<const std::int64_t> targets) {
    update(scores.value(), targets);
  }

  // A matrix of the given counts, row-major as counts(): a metric state summed over ranks read back.
  static ConfusionMatrix from_counts(std::int64_t num_classes, std::span<const double> counts) {
    ConfusionMatrix m(num_classes);
    check(counts.size() == m.counts_.size(), "ConfusionMatrix::from_counts: ", counts.size(), " counts for ",
          num_classes, " classes, which need ", m.counts_.size());
    for (std::size_t i = 0; i < counts.size(); ++i) m.counts_[i] = static_cast<std::int64_t>(counts[i]);
    return m;
  }

  std::int64_t num_classes() const { return classes_; }
  std::int64_t operator()(std::int64_t target, std::int64_t predicted) const {
    check(0 <= target && target < classes_ && 0 <= predicted && predicted < classes_, "ConfusionMatrix: (",
          target, ", ", predicted, ") is outside ", classes_, " x ", classes_);
    return counts_[static_cast<std::size_t>(target * classes_ + predicted)];
  }
  // Row-major: counts()[target * num_classes + predicted].
  const std::vector<std::int64_t>& counts() const { return counts_; }
  std::int64_t total() const {
    std::int64_t n = 0;
    for (auto c : counts_) n += c;
    return n;
  }
  double accuracy() const {
    std::int64_t hits = 0;
    for (std::int64_t c = 0; c < classes_; ++c) hits += (*this)(c, c);
    return detail::ratio(hits, total());
  }

  // Per class: IoU = TP / (TP + FP + FN), Dice = 2 TP / (2 TP + FP + FN); NaN for a class that
  // is in neither the targets nor the predictions, and the means leave those out.
  std::vector<double> iou() const { return per_class(1); }
  std::vector<double> dice() const { return per_class(2); }
  double mean_iou() const { return detail::mean_of_present(iou()); }
  double mean_dice() const { return detail::mean_of_present(dice()); }

  // The counts summed over every rank of comm (a collective: every rank calls it).
  template <Communicator C>
  ConfusionMatrix reduced(C& comm) const {
    ConfusionMatrix out = *this;
    detail::allreduce_counts(comm, out.counts_, "ConfusionMatrix");
    return out;
  }
  void reset() { std::fill(counts_.begin(), counts_.end(), 0); }

 private:
  // tp_weight * TP / (tp_weight * TP + FP + FN) for each class.
  std::vector<double> per_class(std::int64_t tp_weight) const {
    std::vector<double> out(static_cast<std::size_t>(classes_));
    for (std::int64_t c = 0; c < classes_; ++c) {
      std::int64_t row = 0, column = 0;
      for (std::int64_t j = 0; j < classes_; ++j) row += (*this)(c, j), column += (*this)(j, c);
      const std::int64_t tp = (*this)(c, c), fn = row - tp, fp = column - tp;
      out[static_cast<std::size_t>(c)] = detail::ratio(tp_weight * tp, tp_weight * tp + fp + fn);
    }
    return out;
  }

  std::int64_t classes_;
  std::optional<std::int64_t> ignore_;
  std::vector<std::int64_t> counts_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_OP_DECLARATION(void ptrain::TopKAccuracy::update<float, ptrain::Cpu>(
    const ptrain::Tensor<float, ptrain::Cpu>&, std::span<const std::int64_t>))
PTRAIN_PREBUILT_OP_DECLARATION(void ptrain::TopKAccuracy::update<double, ptrain::Cpu>(
    const ptrain::Tensor<double, ptrain::Cpu>&, std::span<const std::int64_t>))
