#pragma once
// Losses on any device, each reduced to the mean as a scalar of shape [] (kernels through
// kernels/loss.hpp): cross_entropy (fused log-softmax and
// NLL, with PyTorch's label smoothing), nll_loss, mse_loss and binary_cross_entropy_with_logits.
//
// Targets are class indices given as a span of int64 (a std::vector<std::int64_t> converts),
// one per position of the scores: scores [N, C] take N targets; scores [N, C, d1, ..., dk]
// (per-pixel classes, as in segmentation) take N*d1*...*dk targets in row-major order. Targets
// are checked on the host (a class out of range would make a kernel read outside a row), copied
// to the device once per call and kept there for backward. The incoming gradient stays on the
// device too: backward multiplies by it in a kernel rather than reading it back.
#include <cstdint>
#include <span>
#include <utility>

#include "ptrain/autograd/detail/class_layout.hpp"
#include "ptrain/autograd/detail/indices.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/loss.hpp"
#include "ptrain/core/prebuilt.hpp"

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
template <class T, Device D>
Var<T, D> cross_entropy(const Var<T, D>& logits, std::span<const std::int64_t> targets, double label_smoothing = 0.0,
                        double grad_scale = 1.0) {
  const auto layout = detail::cross_entropy_layout(logits.shape(), targets, label_smoothing);
  const Tensor<std::int64_t, D> kept_targets = detail::indices_on<D>(targets);
  Tensor<accumulate_t<T>, D> lse(Shape{layout.outer * layout.inner});
  Tensor<T, D> y(Shape{});
  kernels::cross_entropy_forward(kernels::executor_for<D>{}, logits.value().data(), kept_targets.data(), lse.data(),
                                 layout, label_smoothing, y.data());
  return make_var<T, D>(std::move(y), {logits}, "cross_entropy",
                        [kept_targets, lse, layout, label_smoothing, grad_scale](Node<T, D>& self) {
                          const Tensor<T, D>& x = self.inputs[0]->value;
                          Tensor<T, D> gx(x.shape());
                          kernels::cross_entropy_backward(kernels::executor_for<D>{}, x.data(), kept_targets.data(),
                                                          lse.data(), self.grad.data(), grad_scale, gx.data(), layout,
                                                          label_smoothing);
                          self.inputs[0]->accumulate(std::move(gx));
                        });
}

// torch.nn.functional.nll_loss(log_probs, targets), reduction mean: -mean(log_probs[.., t, ..]).
template <class T, Device D>
Var<T, D> nll_loss(const Var<T, D>& log_probs, std::span<const std::int64_t> targets) {
  const auto layout = detail::nll_loss_layout(log_probs.shape(), targets);
  const Tensor<std::int64_t, D> kept_targets = detail::indices_on<D>(targets);
  Tensor<T, D> y(Shape{});
  kernels::nll_loss_forward(kernels::executor_for<D>{}, log_probs.value().data(), kept_targets.data(), layout,
                            y.data());
  return make_var<T, D>(std::move(y), {log_probs}, "nll_loss", [kept_targets, layout](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::nll_loss_backward(kernels::executor_for<D>{}, kept_targets.data(), layout, self.grad.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// torch.nn.functional.mse_loss(pred, target), reduction mean: mean((pred - target)^2). Both
// take a gradient when they need one (target is usually a constant).
template <class T, Device D>
Var<T, D> mse_loss(const Var<T, D>& pred, const Var<T, D>& target) {
  detail::check_mse_shapes(pred.shape(), target.shape());
  const std::int64_t n = pred.numel();
  Tensor<T, D> y(Shape{});
  kernels::mse_loss_forward(kernels::executor_for<D>{}, pred.value().data(), target.value().data(), n, y.data());
  return make_var<T, D>(std::move(y), {pred, target}, "mse_loss", [n](Node<T, D>& self) {
    for (std::size_t k = 0; k < 2; ++k) {
      if (!self.input_needs_grad(k)) continue;
      Tensor<T, D> gk(self.inputs[k]->value.shape());
      kernels::mse_loss_backward(kernels::executor_for<D>{}, self.inputs[k]->value.data(),
                                 self.inputs[1 - k]->value.data(), self.grad.data(), n, gk.data());
      self.inputs[k]->accumulate(std::move(gk));
    }
  });
}

// torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, pos_weight=pw), reduction
// mean: the mean of (1 - t) x + (1 + (pw - 1) t) log(1 + e^-x), stable for any logit (see
// kernels::BceWithLogits). Targets are probabilities of the logits' shape and take a gradient
// when they need one. pos_weight, a constant on the logits' device, broadcasts against the logits
// as in PyTorch ([C] weighs the classes of [N, C] logits; [C, 1, 1] those of [N, C, H, W]);
// undefined means 1.
template <class T, Device D>
Var<T, D> binary_cross_entropy_with_logits(const Var<T, D>& logits, const Var<T, D>& targets,
                                           const Tensor<T, D>& pos_weight = {}) {
  const kernels::BroadcastIndex weight_at = detail::checked_bce_with_logits_weight_at(
      logits.shape(), targets.shape(), pos_weight.defined(), pos_weight.shape());
  const std::int64_t n = logits.numel();
  Tensor<T, D> y(Shape{});
  kernels::bce_with_logits_forward(kernels::executor_for<D>{}, logits.value().data(), targets.value().data(),
                                   pos_weight.defined() ? pos_weight.data() : nullptr, weight_at, n, y.data());
  return make_var<T, D>(std::move(y), {logits, targets}, "binary_cross_entropy_with_logits",
                        [pos_weight, weight_at, n](Node<T, D>& self) {
                          const bool need_x = self.input_needs_grad(0), need_t = self.input_needs_grad(1);
                          Tensor<T, D> gx, gt;
                          if (need_x) gx = Tensor<T, D>(self.inputs[0]->value.shape());
                          if (need_t) gt = Tensor<T, D>(self.inputs[1]->value.shape());
                          kernels::bce_with_logits_backward(
                              kernels::executor_for<D>{}, self.inputs[0]->value.data(), self.inputs[1]->value.data(),
                              pos_weight.defined() ? pos_weight.data() : nullptr, weight_at, n, self.grad.data(),
                              need_x ? gx.data() : nullptr, need_t ? gt.data() : nullptr);
                          if (need_x) self.inputs[0]->accumulate(std::move(gx));
                          if (need_t) self.inputs[1]->accumulate(std::move(gt));
                        });
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::cross_entropy)
PTRAIN_PREBUILT_OPS_FD(ptrain::nll_loss)
PTRAIN_PREBUILT_OPS_FD(ptrain::mse_loss)
PTRAIN_PREBUILT_OPS_FD(ptrain::binary_cross_entropy_with_logits)
