#pragma once
// Top-1 predictions and correct counts for metrics, on any device; no gradient is recorded.
// Scores use the layout of the losses (classes on dimension 1, one target per position; see
// loss.hpp). argmax and the count of matches run where the scores are (kernels/loss.hpp); host
// targets go over once and the results come back.
#include <cstdint>
#include <span>
#include <vector>

#include "ptrain/autograd/detail/class_layout.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/kernels/loss.hpp"

namespace ptrain {

// The index of the largest score of each position (the first one on ties, as torch.argmax).
template <class T, Device D>
std::vector<std::int64_t> argmax_classes(const Tensor<T, D>& scores) {
  check(scores.rank() >= 2, "argmax_classes: expected scores of shape [N, C] or [N, C, d1, ...], got ", scores.shape());
  const auto l = kernels::ReductionLayout::around(scores.shape(), 1);
  check(l.n > 0, "argmax_classes: scores of shape ", scores.shape(), " have no classes");
  Tensor<std::int64_t, D> best(Shape{l.outer * l.inner});
  kernels::argmax_classes(kernels::executor_for<D>{}, scores.data(), l, best.data());
  return best.to_vector();
}

// How many positions have their largest score at the target class.
template <class T, Device D>
std::int64_t top1_correct(const Tensor<T, D>& scores, std::span<const std::int64_t> targets) {
  const auto layout = detail::class_layout(scores.shape(), targets, "top1_correct");
  Tensor<std::int64_t, D> device_targets(Shape{static_cast<std::int64_t>(targets.size())});
  D::copy_from_host(device_targets.data(), targets.data(), targets.size());
  Tensor<std::int64_t, D> count(Shape{1});
  kernels::top1_correct(kernels::executor_for<D>{}, scores.data(), device_targets.data(), layout, count.data());
  return count.to_vector()[0];
}
template <class T, Device D>
std::int64_t top1_correct(const Var<T, D>& scores, std::span<const std::int64_t> targets) {
  return top1_correct(scores.value(), targets);
}

}  // namespace ptrain
