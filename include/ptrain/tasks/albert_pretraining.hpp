#pragma once
// AlbertPreTraining: the task of ALBERT's pre-training, as HF's AlbertForPreTraining computes its
// loss: the mean cross entropy of the masked tokens (labels -100 elsewhere) plus the cross entropy
// of sentence-order prediction. The model's output is AlbertForPreTraining's one tensor
// [N, S * V + 2] (models/albert.hpp): the MLM logits of each position, then the two SOP logits.
// Targets: the MLM labels [N, S] (the original token where one was masked, -100 elsewhere) and one
// SOP label per row (0: in order, 1: swapped). Metrics: mlm_loss (the mean over the epoch's masked
// tokens), mlm_accuracy (over the same tokens) and sop_accuracy.
//
// A loader's Batch carries them as target maps of S + 1 values per row: the S labels, then the SOP
// label (batch_targets reads that).
//
// A pipeline weighs micro-batches by their rows, so its loss is the whole batch's when every
// micro-batch masks the same share of tokens; the MLM term is otherwise a mean per micro-batch.
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ptrain/autograd/ops/accuracy.hpp"
#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/autograd/ops/narrow.hpp"
#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/data/loader.hpp"
#include "ptrain/tasks/sequence_modelling.hpp"

namespace ptrain {

struct AlbertTargets {
  Tensor<std::int64_t> mlm_labels;       // [N, S]
  std::vector<std::int64_t> sop_labels;  // N
};

struct AlbertPreTraining {
  using target_type = AlbertTargets;
  std::int64_t vocab_size = 0;
  std::int64_t ignore_index = -100;  // HF's: positions not masked

  std::int64_t rows(const target_type& targets) const {
    check(targets.mlm_labels.rank() == 2 && targets.mlm_labels.size(0) == static_cast<std::int64_t>(targets.sop_labels.size()),
          "AlbertPreTraining: MLM labels of shape ", targets.mlm_labels.shape(), " and ", targets.sop_labels.size(),
          " SOP labels (expected [N, S] and N)");
    return targets.mlm_labels.size(0);
  }
  target_type slice(const target_type& targets, std::int64_t begin, std::int64_t end) const {
    return {targets.mlm_labels.slice(begin, end),
            std::vector<std::int64_t>(targets.sop_labels.begin() + begin, targets.sop_labels.begin() + end)};
  }
  double loss_weight(const target_type& targets) const { return static_cast<double>(rows(targets)); }

  // The targets of a loader's batch: target maps [N, S + 1], the MLM labels then the SOP label.
  target_type batch_targets(const Batch& batch) const {
    check(batch.target_shape.rank() == 2 && batch.target_shape[1] >= 2, "AlbertPreTraining: batch targets of shape ",
          batch.target_shape, " (expected [N, S + 1]: the MLM labels of each position, then the SOP label)");
    const std::int64_t n = batch.target_shape[0], s = batch.target_shape[1] - 1;
    target_type out{Tensor<std::int64_t>({n, s}), {}};
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t i = 0; i < s; ++i) out.mlm_labels[r * s + i] = batch.targets[static_cast<std::size_t>(r * (s + 1) + i)];
      out.sop_labels.push_back(batch.targets[static_cast<std::size_t>(r * (s + 1) + s)]);
    }
    return out;
  }

  template <class T, class D>
  Var<T, D> loss(const Var<T, D>& output, const target_type& targets, double grad_scale) const {
    const auto [mlm, sop] = heads(output, targets);
    return add(mlm_task().loss(mlm, targets.mlm_labels, grad_scale),
               cross_entropy(sop, std::span<const std::int64_t>(targets.sop_labels), 0.0, grad_scale));
  }

  // [MLM loss summed over masked tokens, masked tokens, of them predicted, SOP correct, rows]
  std::size_t state_size() const { return 5; }
  template <class T, class D>
  void accumulate(const Tensor<T, D>& scores, const target_type& targets, double, std::span<double> state) const {
    NoGradGuard no_grad;
    const auto [mlm, sop] = heads(Var<T, D>(scores), targets);
    const auto sequence = mlm_task();
    const double tokens = sequence.loss_weight(targets.mlm_labels);
    if (tokens > 0) {
      state[0] += static_cast<double>(sequence.loss(mlm, targets.mlm_labels, 1.0).value().to_vector()[0]) * tokens;
      state[1] += tokens;
      const auto predicted = argmax_classes(reshape(mlm, {-1, vocab_size}).value());
      for (std::int64_t i = 0; i < targets.mlm_labels.numel(); ++i) {
        const std::int64_t label = targets.mlm_labels[i];
        state[2] += label != ignore_index && predicted[static_cast<std::size_t>(i)] == label;
      }
    }
    state[3] += static_cast<double>(top1_correct(sop, std::span<const std::int64_t>(targets.sop_labels)));
    state[4] += static_cast<double>(targets.sop_labels.size());
  }
  std::vector<std::string> metric_names() const { return {"mlm_loss", "mlm_accuracy", "sop_accuracy"}; }
  std::vector<double> metric_values(std::span<const double> state) const {
    const double nan = std::nan("");
    return {state[1] > 0 ? state[0] / state[1] : nan, state[1] > 0 ? state[2] / state[1] : nan,
            state[4] > 0 ? state[3] / state[4] : nan};
  }

 private:
  SequenceModelling mlm_task() const { return SequenceModelling{.ignore_index = ignore_index}; }

  // The output's two heads: MLM logits [N, S, V] and SOP logits [N, 2].
  template <class T, class D>
  std::pair<Var<T, D>, Var<T, D>> heads(const Var<T, D>& output, const target_type& targets) const {
    const std::int64_t n = rows(targets), s = targets.mlm_labels.size(1);
    check(vocab_size > 0, "AlbertPreTraining: vocab_size ", vocab_size, " (set it to the model's)");
    check(output.shape() == Shape{n, s * vocab_size + 2}, "AlbertPreTraining: output of shape ", output.shape(),
          " for ", n, " sequences of ", s, " tokens (expected [", n, ", ", s * vocab_size + 2,
          "]: S * V MLM logits, then 2 SOP logits)");
    return {reshape(narrow(output, 1, 0, s * vocab_size), {n, s, vocab_size}), narrow(output, 1, s * vocab_size, 2)};
  }
};

}  // namespace ptrain
