#pragma once
// Top-1 predictions and correct counts for metrics; no gradient is recorded. Scores use the
// layout of the losses (classes on dimension 1, one target per position; see loss.hpp).
#include <cstdint>
#include <span>
#include <vector>

#include "ptrain/autograd/detail/class_layout.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/geometry/layout.hpp"

namespace ptrain {

// The index of the largest score of each position (the first one on ties, as torch.argmax).
template <class T>
std::vector<std::int64_t> argmax_classes(const Tensor<T>& scores) {
  check(scores.rank() >= 2, "argmax_classes: expected scores of shape [N, C] or [N, C, d1, ...], got ",
        scores.shape());
  const auto l = kernels::ReductionLayout::around(scores.shape(), 1);
  check(l.n > 0, "argmax_classes: scores of shape ", scores.shape(), " have no classes");
  std::vector<std::int64_t> best(static_cast<std::size_t>(l.outer * l.inner), 0);
  const T* x = scores.data();
  for (std::int64_t o = 0; o < l.outer; ++o) {
    const T* block = x + o * l.n * l.inner;
    std::int64_t* out = best.data() + o * l.inner;
    for (std::int64_t k = 0; k < l.inner; ++k) {
      std::int64_t arg = 0;
      T max = block[k];
      for (std::int64_t c = 1; c < l.n; ++c)
        if (block[c * l.inner + k] > max) {
          max = block[c * l.inner + k];
          arg = c;
        }
      out[k] = arg;
    }
  }
  return best;
}

// How many positions have their largest score at the target class.
template <class T>
std::int64_t top1_correct(const Tensor<T>& scores, std::span<const std::int64_t> targets) {
  detail::class_layout(scores.shape(), targets, "top1_correct");
  const auto predicted = argmax_classes(scores);
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == targets[i];
  return correct;
}
template <class T>
std::int64_t top1_correct(const Var<T>& scores, std::span<const std::int64_t> targets) {
  return top1_correct(scores.value(), targets);
}

}  // namespace ptrain
