#pragma once
// EpochTotals: an epoch's (or a batch's) loss, correct count and samples, summed; the parallel
// policies reduce them across ranks.
#include <cmath>

namespace ptrain {

struct EpochTotals {
  double loss_sum = 0;  // sum over samples of the per-sample loss
  double correct = 0;
  double samples = 0;
  double loss() const { return samples > 0 ? loss_sum / samples : std::nan(""); }
  double accuracy() const { return samples > 0 ? correct / samples : std::nan(""); }
  EpochTotals& operator+=(const EpochTotals& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    samples += o.samples;
    return *this;
  }
};

}  // namespace ptrain
