#pragma once
// cross_entropy, nll_loss, mse_loss and binary_cross_entropy_with_logits on a device other than Cpu
// (HostEmulated, Cuda): the fused kernels of kernels/indexed/loss.hpp through executor_for<D>, with
// the CPU ops' signatures and checks.
//
// Targets come from the host, as the data loader yields them and as the CPU op takes them: they
// are checked there (a class out of range would make the kernels read outside a row), copied to
// the device once per call (positions int64s) and kept there for backward. The incoming gradient
// stays on the device too: backward multiplies by it in a kernel rather than reading it back.
#include <cstdint>
#include <span>
#include <utility>

#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"
#include "ptrain/kernels/indexed/loss.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"
#include "ptrain/kernels/indexed/softmax.hpp"
#include "ptrain/kernels/geometry/layout.hpp"

namespace ptrain {

namespace detail {
// x[i] *= factor[0], factor a one-element device tensor (the gradient of a scalar loss).
template <class T>
struct MultiplyByScalarAt {
  T* x;
  const T* factor;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    x[i] = kernels::from_accumulate<T>(kernels::to_accumulate(x[i]) * kernels::to_accumulate(factor[0]));
  }
};

// The log-probability at each position's target (nll_loss' terms).
template <class T>
struct TargetEntry {
  const T* x;
  const std::int64_t* targets;
  kernels::ReductionLayout l;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t row) const {
    return kernels::indexed::load_double(x, kernels::indexed::row_element(l, row, targets[row]));
  }
};
// gx at each position's target = factor * g[0]; one thread per position, each writing its own element.
template <class T>
struct TargetGrad {
  T* gx;
  const std::int64_t* targets;
  kernels::ReductionLayout l;
  const T* g;
  double factor;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t row) const {
    gx[kernels::indexed::row_element(l, row, targets[row])] = kernels::from_accumulate<T>(
        static_cast<accumulate_t<T>>(factor * static_cast<double>(kernels::to_accumulate(g[0]))));
  }
};

// out[i] = factor * g[0] * (a[i] - b[i]): mse_loss' gradient, g[0] the incoming one on the device.
template <class T>
struct ScaledDifferenceAt {
  const T* a;
  const T* b;
  const T* g;
  accumulate_t<T> factor;
  T* out;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    using kernels::to_accumulate;
    out[i] = kernels::from_accumulate<T>(factor * to_accumulate(g[0]) * (to_accumulate(a[i]) - to_accumulate(b[i])));
  }
};
}  // namespace detail

// torch.nn.functional.cross_entropy(logits, targets, label_smoothing, reduction mean), as the CPU
// op (autograd/ops/loss.hpp): scores [N, C] or [N, C, d1, ...], one host target per position,
// grad_scale multiplying only the gradient sent to the logits.
template <class T, kernels::ExecutorDevice D>
Var<T, D> cross_entropy(const Var<T, D>& logits, std::span<const std::int64_t> targets,
                        double label_smoothing = 0.0, double grad_scale = 1.0) {
  const auto layout = detail::cross_entropy_layout(logits.shape(), targets, label_smoothing);
  const std::int64_t positions = layout.outer * layout.inner;
  Tensor<std::int64_t, D> device_targets(Shape{positions});
  D::copy_from_host(device_targets.data(), targets.data(), static_cast<std::size_t>(positions));
  const kernels::executor_for<D> ex;
  Tensor<accumulate_t<T>, D> lse(Shape{positions});
  Tensor<T, D> y(Shape{});
  kernels::indexed::cross_entropy_forward<T, T>(ex, logits.value().data(), device_targets.data(), lse.data(), layout,
                                                label_smoothing, 1.0 / static_cast<double>(positions), y.data());
  return make_var<T, D>(
      std::move(y), {logits}, "cross_entropy",
      [device_targets, lse, layout, label_smoothing, positions, grad_scale](Node<T, D>& self) {
        const kernels::executor_for<D> ex;
        const Tensor<T, D>& x = self.inputs[0]->value;
        Tensor<T, D> gx(x.shape());
        const auto scale = static_cast<accumulate_t<T>>(grad_scale / static_cast<double>(positions));
        kernels::indexed::cross_entropy_backward(ex, x.data(), device_targets.data(), lse.data(), scale, gx.data(),
                                                 layout, label_smoothing);
        ex.indexed(gx.numel(), detail::MultiplyByScalarAt<T>{gx.data(), self.grad.data()});
        self.inputs[0]->accumulate(std::move(gx));
      });
}

// torch.nn.functional.nll_loss(log_probs, targets), reduction mean, as the CPU op: host targets,
// checked there and copied to the device once per call, as cross_entropy's.
template <class T, kernels::ExecutorDevice D>
Var<T, D> nll_loss(const Var<T, D>& log_probs, std::span<const std::int64_t> targets) {
  const auto layout = detail::nll_loss_layout(log_probs.shape(), targets);
  const std::int64_t positions = layout.outer * layout.inner;
  Tensor<std::int64_t, D> device_targets(Shape{positions});
  D::copy_from_host(device_targets.data(), targets.data(), static_cast<std::size_t>(positions));
  Tensor<T, D> y(Shape{});
  kernels::indexed::sum_terms(kernels::executor_for<D>{}, positions,
                              detail::TargetEntry<T>{log_probs.value().data(), device_targets.data(), layout},
                              -1.0 / static_cast<double>(positions), y.data());
  return make_var<T, D>(std::move(y), {log_probs}, "nll_loss", [device_targets, layout, positions](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::indexed::fill(ex, gx.data(), gx.numel(), accumulate_t<T>(0));
    ex.indexed(positions, detail::TargetGrad<T>{gx.data(), device_targets.data(), layout, self.grad.data(),
                                                -1.0 / static_cast<double>(positions)});
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// torch.nn.functional.mse_loss(pred, target), reduction mean, as the CPU op: both take a gradient
// when they need one.
template <class T, kernels::ExecutorDevice D>
Var<T, D> mse_loss(const Var<T, D>& pred, const Var<T, D>& target) {
  detail::check_mse_shapes(pred.shape(), target.shape());
  const std::int64_t n = pred.numel();
  Tensor<T, D> y(Shape{});
  kernels::indexed::mse_sum(kernels::executor_for<D>{}, pred.value().data(), target.value().data(), n,
                            1.0 / static_cast<double>(n), y.data());
  return make_var<T, D>(std::move(y), {pred, target}, "mse_loss", [n](Node<T, D>& self) {
    const auto factor = static_cast<accumulate_t<T>>(2.0 / static_cast<double>(n));
    for (std::size_t k = 0; k < 2; ++k) {
      if (!self.input_needs_grad(k)) continue;
      Tensor<T, D> gk(self.inputs[k]->value.shape());
      kernels::executor_for<D>{}.indexed(n, detail::ScaledDifferenceAt<T>{self.inputs[k]->value.data(),
                                                                          self.inputs[1 - k]->value.data(),
                                                                          self.grad.data(), factor, gk.data()});
      self.inputs[k]->accumulate(std::move(gk));
    }
  });
}

// torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, pos_weight), reduction mean,
// as the CPU op: pos_weight a device tensor broadcasting against the logits, undefined for none.
template <class T, kernels::ExecutorDevice D>
Var<T, D> binary_cross_entropy_with_logits(const Var<T, D>& logits, const Var<T, D>& targets,
                                           const Tensor<T, D>& pos_weight = {}) {
  const kernels::BroadcastIndex weight_at = detail::checked_bce_with_logits_weight_at(
      logits.shape(), targets.shape(), pos_weight.defined(), pos_weight.shape());
  const std::int64_t n = logits.numel();
  Tensor<T, D> y(Shape{});
  kernels::indexed::bce_with_logits_sum(kernels::executor_for<D>{}, logits.value().data(), targets.value().data(),
                                        pos_weight.defined() ? pos_weight.data() : nullptr, weight_at, n,
                                        1.0 / static_cast<double>(n), y.data());
  return make_var<T, D>(std::move(y), {logits, targets}, "binary_cross_entropy_with_logits",
                        [pos_weight, weight_at, n](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const bool need_x = self.input_needs_grad(0), need_t = self.input_needs_grad(1);
    Tensor<T, D> gx, gt;
    if (need_x) gx = Tensor<T, D>(self.inputs[0]->value.shape());
    if (need_t) gt = Tensor<T, D>(self.inputs[1]->value.shape());
    kernels::indexed::bce_with_logits_backward(
        ex, self.inputs[0]->value.data(), self.inputs[1]->value.data(),
        pos_weight.defined() ? pos_weight.data() : nullptr, weight_at, n,
        static_cast<accumulate_t<T>>(1.0 / static_cast<double>(n)), need_x ? gx.data() : nullptr,
        need_t ? gt.data() : nullptr);
    if (need_x) {
      ex.indexed(n, detail::MultiplyByScalarAt<T>{gx.data(), self.grad.data()});
      self.inputs[0]->accumulate(std::move(gx));
    }
    if (need_t) {
      ex.indexed(n, detail::MultiplyByScalarAt<T>{gt.data(), self.grad.data()});
      self.inputs[1]->accumulate(std::move(gt));
    }
  });
}

}  // namespace ptrain
