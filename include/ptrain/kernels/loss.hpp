#pragma once
// The dispatch points of the losses and top-1 counts (autograd/ops/loss.hpp, accuracy.hpp), the
// executor first. CpuExecutor reaches the fused cross-entropy of kernels/cpu/cross_entropy.hpp and
// the CPU's loops and Eigen sums; any other executor the kernels of kernels/indexed/loss.hpp.
// Every pointer is in the executor's memory, the incoming gradient g (one element) included: on a
// GPU backward multiplies by it in a kernel rather than reading it back. argmax and top-1 have no
// tuned CPU kernel: the indexed ones run on every executor.
#include <Eigen/Core>
#include <cstdint>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/cpu/cross_entropy.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"
#include "ptrain/kernels/indexed/loss.hpp"

namespace ptrain::kernels {

// y[0] = mean over positions of the label-smoothed cross-entropy; lse keeps each position's
// log-sum-exp for backward.
template <class T>
void cross_entropy_forward(const CpuExecutor&, const T* x, const std::int64_t* targets, accumulate_t<T>* lse,
                           const ReductionLayout& l, double eps, T* y) {
  ProfiledOp profiled("loss");
  const double total = cross_entropy_forward(x, targets, lse, l, eps);
  y[0] = static_cast<T>(total / static_cast<double>(l.outer * l.inner));
}
template <class Ex, class T>
void cross_entropy_forward(const Ex& ex, const T* x, const std::int64_t* targets, accumulate_t<T>* lse,
                           const ReductionLayout& l, double eps, T* y) {
  indexed::cross_entropy_forward<T, T>(ex, x, targets, lse, l, eps, 1.0 / static_cast<double>(l.outer * l.inner), y);
}

// gx = g[0] * grad_scale / positions * dloss/dx.
template <class T>
void cross_entropy_backward(const CpuExecutor&, const T* x, const std::int64_t* targets, const accumulate_t<T>* lse,
                            const T* g, double grad_scale, T* gx, const ReductionLayout& l, double eps) {
  ProfiledOp profiled("loss");
  const auto scale =
      static_cast<accumulate_t<T>>(static_cast<double>(g[0]) * grad_scale / static_cast<double>(l.outer * l.inner));
  cross_entropy_backward(x, targets, lse, scale, gx, l, eps);
}
template <class Ex, class T>
void cross_entropy_backward(const Ex& ex, const T* x, const std::int64_t* targets, const accumulate_t<T>* lse,
                            const T* g, double grad_scale, T* gx, const ReductionLayout& l, double eps) {
  const auto scale = static_cast<accumulate_t<T>>(grad_scale / static_cast<double>(l.outer * l.inner));
  indexed::cross_entropy_backward(ex, x, targets, lse, scale, gx, l, eps);
  ex.indexed(l.numel(), indexed::MultiplyByScalarAt<T>{gx, g});
}

// y[0] = -mean of the log-probabilities at the targets.
template <class T>
void nll_loss_forward(const CpuExecutor&, const T* x, const std::int64_t* targets, const ReductionLayout& l, T* y) {
  ProfiledOp profiled("loss");
  const std::int64_t positions = l.outer * l.inner;
  double total = 0;
  for (std::int64_t o = 0, i = 0; o < l.outer; ++o)
    for (std::int64_t k = 0; k < l.inner; ++k, ++i)
      total -= static_cast<double>(x[(o * l.n + targets[i]) * l.inner + k]);
  y[0] = static_cast<T>(total / static_cast<double>(positions));
}
template <class Ex, class T>
void nll_loss_forward(const Ex& ex, const T* x, const std::int64_t* targets, const ReductionLayout& l, T* y) {
  const std::int64_t positions = l.outer * l.inner;
  indexed::sum_terms(ex, positions, indexed::TargetEntry<T>{x, targets, l}, -1.0 / static_cast<double>(positions), y);
}

// gx = -g[0] / positions at each target, 0 elsewhere.
template <class T>
void nll_loss_backward(const CpuExecutor&, const std::int64_t* targets, const ReductionLayout& l, const T* g, T* gx) {
  ProfiledOp profiled("loss");
  const std::int64_t positions = l.outer * l.inner;
  std::fill_n(gx, l.numel(), T(0));
  const T share = static_cast<T>(-static_cast<double>(g[0]) / static_cast<double>(positions));
  for (std::int64_t o = 0, i = 0; o < l.outer; ++o)
    for (std::int64_t k = 0; k < l.inner; ++k, ++i) gx[(o * l.n + targets[i]) * l.inner + k] += share;
}
template <class Ex, class T>
void nll_loss_backward(const Ex& ex, const std::int64_t* targets, const ReductionLayout& l, const T* g, T* gx) {
  const std::int64_t positions = l.outer * l.inner;
  indexed::fill(ex, gx, l.numel(), accumulate_t<T>(0));
  ex.indexed(positions, indexed::TargetGrad<T>{gx, targets, l, g, -1.0 / static_cast<double>(positions)});
}

// y[0] = mean((pred - target)^2) over n elements.
template <class T>
void mse_loss_forward(const CpuExecutor&, const T* pred, const T* target, std::int64_t n, T* y) {
  ProfiledOp profiled("loss");
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  const double total =
      (Eigen::Map<const Array>(pred, n) - Eigen::Map<const Array>(target, n)).template cast<double>().square().sum();
  y[0] = static_cast<T>(total / static_cast<double>(n));
}
template <class Ex, class T>
void mse_loss_forward(const Ex& ex, const T* pred, const T* target, std::int64_t n, T* y) {
  indexed::mse_sum(ex, pred, target, n, 1.0 / static_cast<double>(n), y);
}

// out = 2 g[0] / n * (a - b): the gradient of mse_loss in a (pred or target, b the other).
template <class T>
void mse_loss_backward(const CpuExecutor&, const T* a, const T* b, const T* g, std::int64_t n, T* out) {
  ProfiledOp profiled("loss");
  map2(a, b, out, n, ScaledDifference<T>{static_cast<T>(2.0 * static_cast<double>(g[0]) / static_cast<double>(n))});
}
template <class Ex, class T>
void mse_loss_backward(const Ex& ex, const T* a, const T* b, const T* g, std::int64_t n, T* out) {
  const auto factor = static_cast<accumulate_t<T>>(2.0 / static_cast<double>(n));
  ex.indexed(n, indexed::ScaledDifferenceAt<T>{a, b, g, factor, out});
}

// y[0] = mean of BceWithLogits' loss over n elements; pos_weight (null: none) broadcast by
// pos_weight_at. Summed in fixed blocks: the result does not depend on the thread count.
template <class T>
void bce_with_logits_forward(const CpuExecutor&, const T* x, const T* t, const T* pos_weight,
                             const BroadcastIndex& pos_weight_at, std::int64_t n, T* y) {
  ProfiledOp profiled("loss");
  const double total = sum_indexed(n, [&](std::int64_t i) {
    return BceWithLogits{}.loss(x[i], t[i], pos_weight ? pos_weight[pos_weight_at(i)] : T(1));
  });
  y[0] = static_cast<T>(total / static_cast<double>(n));
}
template <class Ex, class T>
void bce_with_logits_forward(const Ex& ex, const T* x, const T* t, const T* pos_weight,
                             const BroadcastIndex& pos_weight_at, std::int64_t n, T* y) {
  indexed::bce_with_logits_sum(ex, x, t, pos_weight, pos_weight_at, n, 1.0 / static_cast<double>(n), y);
}

// gx = g[0] / n * dloss/dx and gt = g[0] / n * dloss/dt (either may be null).
template <class T>
void bce_with_logits_backward(const CpuExecutor&, const T* x, const T* t, const T* pos_weight,
                              const BroadcastIndex& pos_weight_at, std::int64_t n, const T* g, T* gx, T* gt) {
  ProfiledOp profiled("loss");
  const T share = static_cast<T>(static_cast<double>(g[0]) / static_cast<double>(n));
  for (T* out : {gx, gt}) {
    if (!out) continue;
    const bool logit = out == gx;
    map_indexed(x, out, n, [&](std::uint64_t u, T xi) {
      const auto i = static_cast<std::int64_t>(u);
      const T pw = pos_weight ? pos_weight[pos_weight_at(i)] : T(1);
      const BceWithLogits bce;
      return share * (logit ? bce.grad_logit(xi, t[i], pw) : bce.grad_target(xi, t[i], pw));
    });
  }
}
template <class Ex, class T>
void bce_with_logits_backward(const Ex& ex, const T* x, const T* t, const T* pos_weight,
                              const BroadcastIndex& pos_weight_at, std::int64_t n, const T* g, T* gx, T* gt) {
  indexed::bce_with_logits_backward(ex, x, t, pos_weight, pos_weight_at, n,
                                    static_cast<accumulate_t<T>>(1.0 / static_cast<double>(n)), gx, gt);
  for (T* out : {gx, gt})
    if (out) ex.indexed(n, indexed::MultiplyByScalarAt<T>{out, g});
}

using indexed::argmax_classes;
using indexed::top1_correct;

}  // namespace ptrain::kernels
