#pragma once
// EpochTotals: an epoch's (or a batch's) sums: the loss, what the loss is a mean over (its
// weight: samples, pixels, tokens), the samples, and the task's metric state (sums and counts,
// see tasks/task.hpp). All are sums, so ranks add them up: flat() lays them out as one vector of
// doubles for the policies' reduce(std::span<double>) point, from_flat() reads them back.
#include <cmath>
#include <span>
#include <vector>

#include "ptrain/core/error.hpp"

namespace ptrain {

struct EpochTotals {
  double loss_sum = 0;     // sum over batches of the batch's mean loss times its loss weight
  double loss_weight = 0;  // sum of the batches' loss weights
  double samples = 0;      // rows of the batches
  std::vector<double> metric_state;

  double loss() const { return loss_weight > 0 ? loss_sum / loss_weight : std::nan(""); }

  EpochTotals& operator+=(const EpochTotals& o) {
    loss_sum += o.loss_sum;
    loss_weight += o.loss_weight;
    samples += o.samples;
    if (metric_state.empty()) metric_state.assign(o.metric_state.size(), 0.0);
    check(o.metric_state.size() == metric_state.size() || o.metric_state.empty(), "EpochTotals: adding a metric state of ",
          o.metric_state.size(), " values to one of ", metric_state.size());
    for (std::size_t i = 0; i < o.metric_state.size(); ++i) metric_state[i] += o.metric_state[i];
    return *this;
  }

  // [loss_sum, loss_weight, samples, metric_state...]
  std::vector<double> flat() const {
    std::vector<double> out{loss_sum, loss_weight, samples};
    out.insert(out.end(), metric_state.begin(), metric_state.end());
    return out;
  }
  static EpochTotals from_flat(std::span<const double> sums) {
    check(sums.size() >= 3, "EpochTotals::from_flat: ", sums.size(), " values; expected at least 3");
    return {sums[0], sums[1], sums[2], std::vector<double>(sums.begin() + 3, sums.end())};
  }
};

}  // namespace ptrain
