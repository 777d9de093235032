#pragma once
// Classification: one class index per sample (targets std::vector<std::int64_t>, scores [N, C]);
// the loss is cross entropy with label smoothing, the metrics are top-k accuracies counted by
// TopKAccuracy: "accuracy" for k = 1, "top<k>_accuracy" for the others. The Trainer's default task.
//
//   Trainer<Net, Classification> t(model, sgd, {}, Classification{.label_smoothing = 0.1, .top_k = {1, 5}});
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/tasks/metrics.hpp"
#include "ptrain/tasks/task.hpp"

namespace ptrain {

struct Classification {
  using target_type = std::vector<std::int64_t>;
  double label_smoothing = 0.0;
  std::vector<int> top_k = {1};

  std::int64_t rows(const target_type& targets) const { return static_cast<std::int64_t>(targets.size()); }
  target_type slice(const target_type& targets, std::int64_t begin, std::int64_t end) const {
    return {targets.begin() + begin, targets.begin() + end};
  }
  double loss_weight(const target_type& targets) const { return static_cast<double>(targets.size()); }

  template <class T, class D>
  Var<T, D> loss(const Var<T, D>& output, const target_type& targets, double grad_scale) const {
    return cross_entropy(output, std::span<const std::int64_t>(targets), label_smoothing, grad_scale);
  }

  // [correct at each k..., samples]
  std::size_t state_size() const { return top_k.size() + 1; }
  template <class T, class D>
  void accumulate(const Tensor<T, D>& scores, const target_type& targets, double, std::span<double> state) const {
    TopKAccuracy counts(top_k);
    counts.update(scores, std::span<const std::int64_t>(targets));
    for (std::size_t i = 0; i < top_k.size(); ++i) state[i] += static_cast<double>(counts.correct(top_k[i]));
    state[top_k.size()] += static_cast<double>(counts.samples());
  }

  std::vector<std::string> metric_names() const;
  std::vector<double> metric_values(std::span<const double> state) const {
    std::vector<double> values;
    const double samples = state[top_k.size()];
    for (std::size_t i = 0; i < top_k.size(); ++i)
      values.push_back(samples > 0 ? state[i] / samples : std::numeric_limits<double>::quiet_NaN());
    return values;
  }
};

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE std::vector<std::string> Classification::metric_names() const {
  std::vector<std::string> names;
  for (int k : top_k) names.push_back(k == 1 ? "accuracy" : "top" + std::to_string(k) + "_accuracy");
  return names;
}
#endif

}  // namespace ptrain

PTRAIN_PREBUILT_OP(ptrain::batch_totals<ptrain::Classification, float, ptrain::Cpu>)
PTRAIN_PREBUILT_OP(ptrain::batch_totals<ptrain::Classification, double, ptrain::Cpu>)
PTRAIN_PREBUILT_OP(ptrain::metric_values<ptrain::Classification>)
