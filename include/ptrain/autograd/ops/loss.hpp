#pragma once
// Losses, each reduced to the mean as a scalar of shape []: cross_entropy (fused log-softmax and
// NLL, with PyTorch's label smoothing), nll_loss, mse_loss and binary_cross_entropy_with_logits.
//
// Targets are class indices given as a span of int64 (a std::vector<std::int64_t> converts),
// one per position of the scores: scores [N, C] take N targets; scores [N, C, d1, ..., dk]
// (per-pixel classes, as in segmentation) take N*d1*...*dk targets in row-major order.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ptrain/autograd/detail/class_layout.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/cpu/cross_entropy.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/functors.hpp"

namespace ptrain {

namespace detail {
// cross_entropy's arguments, checked on the host (on every device): the layout of the scores.
inline kernels::ReductionLayout cross_entropy_layout(const Shape& logits, std::span<const std::int64_t> targets,
                                                     double label_smoothing) {
  check(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy: label_smoothing ", label_smoothing,
        " is outside [0, 1]");
  const auto layout = class_layout(logits, targets, "cross_entropy");
  check(layout.outer * layout.inner > 0, "cross_entropy: logits of shape ", logits,
        " hold no positions to average over");
  return layout;
}

// nll_loss's arguments, checked on the host (on every device): the layout of the log-probabilities.
inline kernels::ReductionLayout nll_loss_layout(const Shape& log_probs, std::span<const std::int64_t> targets) {
  const auto layout = class_layout(log_probs, targets, "nll_loss");
  check(layout.outer * layout.inner > 0, "nll_loss: log_probs of shape ", log_probs,
        " hold no positions to average over");
  return layout;
}

inline void check_mse_shapes(const Shape& pred, const Shape& target) {
  check(pred == target, "mse_loss: prediction of shape ", pred, " and target of shape ", target,
        " differ (expected equal shapes)");
  check(pred.numel() > 0, "mse_loss: empty prediction of shape ", pred);
}

// binary_cross_entropy_with_logits' checks on any device; where each element finds its pos_weight
// (pos_weight an undefined shape: none).
inline kernels::BroadcastIndex checked_bce_with_logits_weight_at(const Shape& logits, const Shape& targets,
                                                                 bool weighted, const Shape& pos_weight) {
  constexpr const char* op = "binary_cross_entropy_with_logits";
  check(logits == targets, op, ": logits of shape ", logits, " and targets of shape ", targets,
        " differ (expected equal shapes)");
  check(logits.numel() > 0, op, ": empty logits of shape ", logits);
  return kernels::BroadcastIndex(weighted ? pos_weight : Shape{}, logits, op);
}
}  // namespace detail

// torch.nn.functional.cross_entropy(logits, targets, label_smoothing=eps), reduction mean:
// the mean over positions of (1 - eps) * (-log p_target) + eps * mean_c(-log p_c),
// p = softmax(logits) over dimension 1. half and bfloat16 logits are computed in float.
// grad_scale multiplies the gradient backward sends to logits, not the loss: the loss scale of
// mixed precision (and 1/k under gradient accumulation), applied in float, because a scaled loss
// or its gradient need not fit a 16-bit type (fp16 ends at 65504; Apex's first scale is 65536).
template <class T>
Var<T> cross_entropy(const Var<T>& logits, std::span<const std::int64_t> targets,
                     double label_smoothing = 0.0, double grad_scale = 1.0) {
  const auto layout = detail::cross_entropy_layout(logits.shape(), targets, label_smoothing);
  const std::int64_t positions = layout.outer * layout.inner;
  auto kept_targets = std::make_shared<std::vector<std::int64_t>>(targets.begin(), targets.end());
  Tensor<accumulate_t<T>> lse(Shape{positions});
  const double total = kernels::cross_entropy_forward(logits.value().data(), kept_targets->data(), lse.data(),
                                                      layout, label_smoothing);
  Tensor<T> y = Tensor<T>::full(Shape{}, static_cast<T>(total / static_cast<double>(positions)));
  return make_var<T>(std::move(y), {logits}, "cross_entropy",
                     [kept_targets, lse, layout, label_smoothing, positions, grad_scale](Node<T>& self) {
                       const Tensor<T>& x = self.inputs[0]->value;
                       Tensor<T> gx(x.shape());
                       const auto scale = static_cast<accumulate_t<T>>(static_cast<double>(self.grad[0]) *
                                                                       grad_scale / static_cast<double>(positions));
                       kernels::cross_entropy_backward(x.data(), kept_targets->data(), lse.data(), scale,
                                                       gx.data(), layout, label_smoothing);
                       self.inputs[0]->accumulate(std::move(gx));
                     });
}

// torch.nn.functional.nll_loss(log_probs, targets), reduction mean: -mean(log_probs[.., t, ..]).
template <class T>
Var<T> nll_loss(const Var<T>& log_probs, std::span<const std::int64_t> targets) {
  const auto layout = detail::nll_loss_layout(log_probs.shape(), targets);
  const std::int64_t positions = layout.outer * layout.inner, C = layout.n, inner = layout.inner;
  // Flat offsets of the picked entries: all backward needs.
  auto picked = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(positions));
  const T* x = log_probs.value().data();
  double total = 0;
  for (std::int64_t o = 0, i = 0; o < layout.outer; ++o)
    for (std::int64_t k = 0; k < inner; ++k, ++i) {
      const std::int64_t at = (o * C + targets[static_cast<std::size_t>(i)]) * inner + k;
      (*picked)[static_cast<std::size_t>(i)] = at;
      total -= static_cast<double>(x[at]);
    }
  Tensor<T> y = Tensor<T>::full(Shape{}, static_cast<T>(total / static_cast<double>(positions)));
  return make_var<T>(std::move(y), {log_probs}, "nll_loss", [picked, positions](Node<T>& self) {
    Tensor<T> gx = Tensor<T>::zeros(self.inputs[0]->value.shape());
    const T g = static_cast<T>(-self.grad[0] / static_cast<double>(positions));
    for (std::int64_t at : *picked) gx[at] += g;
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// torch.nn.functional.mse_loss(pred, target), reduction mean: mean((pred - target)^2). Both
// take a gradient when they need one (target is usually a constant).
template <class T>
Var<T> mse_loss(const Var<T>& pred, const Var<T>& target) {
  detail::check_mse_shapes(pred.shape(), target.shape());
  const double total = (pred.value().array() - target.value().array()).template cast<double>().square().sum();
  const double n = static_cast<double>(pred.numel());
  Tensor<T> y = Tensor<T>::full(Shape{}, static_cast<T>(total / n));
  return make_var<T>(std::move(y), {pred, target}, "mse_loss", [n](Node<T>& self) {
    const auto& p = self.inputs[0]->value;
    const auto& t = self.inputs[1]->value;
    const T factor = static_cast<T>(2.0 * self.grad[0] / n);
    if (self.input_needs_grad(0))
      self.inputs[0]->accumulate(kernels::map2(p, t, kernels::ScaledDifference<T>{factor}));
    if (self.input_needs_grad(1))
      self.inputs[1]->accumulate(kernels::map2(t, p, kernels::ScaledDifference<T>{factor}));
  });
}

// torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, pos_weight=pw), reduction
// mean: the mean of (1 - t) x + (1 + (pw - 1) t) log(1 + e^-x), stable for any logit (see
// kernels::BceWithLogits). Targets are probabilities of the logits' shape and take a gradient
// when they need one. pos_weight, a constant, broadcasts against the logits as in PyTorch
// ([C] weighs the classes of [N, C] logits; [C, 1, 1] those of [N, C, H, W]); undefined means 1.
template <class T>
Var<T> binary_cross_entropy_with_logits(const Var<T>& logits, const Var<T>& targets, const Tensor<T>& pos_weight = {}) {
  constexpr const char* op = "binary_cross_entropy_with_logits";
  const bool weighted = pos_weight.defined();
  const kernels::BroadcastIndex weight_at =
      detail::checked_bce_with_logits_weight_at(logits.shape(), targets.shape(), weighted, pos_weight.shape());
  const auto pw = [pos_weight, weighted, weight_at](std::int64_t i) {
    return weighted ? pos_weight[weight_at(i)] : T(1);
  };
  const T* x = logits.value().data();
  const T* t = targets.value().data();
  const double n = static_cast<double>(logits.numel());
  const double total = kernels::sum_indexed(logits.numel(), [&](std::int64_t i) {
    return kernels::BceWithLogits{}.loss(x[i], t[i], pw(i));
  });
  Tensor<T> y = Tensor<T>::full(Shape{}, static_cast<T>(total / n));
  return make_var<T>(std::move(y), {logits, targets}, op, [pw, n](Node<T>& self) {
    const T* xs = self.inputs[0]->value.data();
    const T* ts = self.inputs[1]->value.data();
    const T g = static_cast<T>(self.grad[0] / n);
    for (std::size_t k = 0; k < 2; ++k) {
      if (!self.input_needs_grad(k)) continue;
      Tensor<T> gk(self.inputs[k]->value.shape());
      kernels::map_indexed(xs, gk.data(), gk.numel(), [&](std::uint64_t u, T xi) {
        const auto i = static_cast<std::int64_t>(u);
        const kernels::BceWithLogits bce;
        return g * (k == 0 ? bce.grad_logit(xi, ts[i], pw(i)) : bce.grad_target(xi, ts[i], pw(i)));
      });
      self.inputs[k]->accumulate(std::move(gk));
    }
  });
}

}  // namespace ptrain
