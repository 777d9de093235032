#pragma once
// batch_norm on any device, as torch.nn.functional.batch_norm on [N, C] or [N, C, H, W], and
// torch.nn.SyncBatchNorm's training through a sync hook; kernels through kernels/batch_norm.hpp.
// batch_norm_relu and batch_norm_add_relu fuse it with the relu (and residual add) that follow it
// in ResNets and VGGs: one pass writes the output and its backward masks the gradient in the
// batch norm's own pass, keeping no intermediate tensor.
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/batch_norm.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/kernels/indexed/batch_norm.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

// Sums a small vector over the replicas of a data-parallel group, in place: how SyncBatchNorm's
// replicas share statistics (ptrain/parallel/sync_batch_norm.hpp makes one from a Communicator).
// Every replica calls it at the same points with the same sizes; an empty one means no replicas.
using BatchNormSync = std::function<void(std::span<double>)>;

namespace detail {
// batch_norm's checks on its arguments, on any device (see batch_norm below); x's layout.
template <class T, class D, class W, class S>
kernels::ChannelLayout checked_batch_norm_layout(const Var<T, D>& x, const Var<W, D>& weight, const Var<W, D>& bias,
                                                 const Tensor<S, D>& running_mean, const Tensor<S, D>& running_var,
                                                 bool training, double eps) {
  const Shape& s = x.shape();
  check(s.rank() == 2 || s.rank() == 4, "batch_norm: input must be [N, C] or [N, C, H, W], got ", s);
  const kernels::ChannelLayout layout{s[0], s[1], s.rank() == 4 ? s[2] * s[3] : 1};
  const std::int64_t C = layout.channels;
  const Shape channel_shape{C};
  if (weight.defined())
    check(weight.shape() == channel_shape, "batch_norm: weight ", weight.shape(), " for input ", s, ", expected [", C,
          "]");
  if (bias.defined())
    check(bias.shape() == channel_shape, "batch_norm: bias ", bias.shape(), " for input ", s, ", expected [", C, "]");
  const bool tracked = running_mean.defined() || running_var.defined();
  if (tracked) {
    check(running_mean.shape() == channel_shape, "batch_norm: running_mean ", running_mean.shape(), " for input ", s,
          ", expected [", C, "]");
    check(running_var.shape() == channel_shape, "batch_norm: running_var ", running_var.shape(), " for input ", s,
          ", expected [", C, "]");
  }
  check(training || tracked, "batch_norm: evaluation needs running_mean and running_var");
  check(eps > 0, "batch_norm: eps must be positive, got ", eps);
  return layout;
}

// Training on one replica takes the statistics over count values per channel.
inline void check_batch_norm_training_count(std::int64_t count, const Shape& x) {
  check(count > 1, "batch_norm: expected more than 1 value per channel when training, got input ", x);
}

// After check_batch_norm_training_count's rule for one replica, the same for the global batch of
// a synchronised layer: count is the values per channel over every replica.
inline void check_global_batch_norm_count(double count, const Shape& x) {
  check(count > 1, "batch_norm: expected more than 1 value per channel when training, got ", count,
        " over all replicas (input here ", x, ")");
}

// The statistics of the union of every replica's values, on any executor: given this replica's
// mean and biased variance per channel over count values (anything when count is 0), writes the
// global mean and biased variance in their place and returns the global count per channel. Two
// sums over the replicas, of buffers in the executor's memory (device memory on a GPU): counts
// and sums, then each replica's squared deviations from the global mean (M2 + n * (mean -
// global)^2), where one sum of sum(x^2) would cancel the variance away when the mean is large.
template <class Ex>
double merge_replica_moments(const Ex& ex, std::int64_t channels, double count, const BatchNormSync& sync,
                             double* mean, double* var) {
  namespace k = kernels::indexed;
  const auto n = static_cast<std::size_t>(channels);
  auto sums = ex.template buffer<double>(channels + 1);
  ex.indexed(channels + 1, k::ReplicaSums{count, mean, sums.data()});
  sync(std::span(sums.data(), n + 1));
  double total = 0;
  Ex::device::copy_to_host(&total, sums.data(), 1);
  if (total <= 1) return total;  // the same on every replica: all skip the second sum, all fail
  auto deviations = ex.template buffer<double>(channels);
  ex.indexed(channels, k::ReplicaDeviations{count, sums.data(), var, mean, deviations.data()});
  sync(std::span(deviations.data(), n));
  ex.indexed(channels, k::GlobalVariance{deviations.data(), total, var});
  return total;
}

}  // namespace detail

namespace detail {
// batch_norm (documented below) and, with relu, relu(batch_norm(x) + residual) as one op, the
// residual (x's shape) added when defined. op names the caller in errors and in the graph.
template <class T, Device D, class S, class W = T>
Var<T, D> batch_norm_op(const Var<T, D>& x, const Var<T, D>& residual, bool relu, const Var<W, D>& weight,
                        const Var<W, D>& bias, Tensor<S, D>& running_mean, Tensor<S, D>& running_var, bool training,
                        double momentum, double eps, const BatchNormSync& sync, const char* op) {
  // Weight and bias wider than x (float beside half or bfloat16) are leaves of their own type's
  // graph: the kernels read them as they are, and backward hands them their gradients itself.
  constexpr bool wide_affine = !std::is_same_v<T, W>;
  static_assert(!wide_affine || (is_reduced_float_v<T> && std::is_same_v<W, float>),
                "batch_norm: a weight and bias of another type than x's are float, beside a half or bfloat16 x");
  if constexpr (wide_affine)
    for (const Var<W, D>* p : {&weight, &bias})
      check(!p->defined() || p->node()->is_leaf(), op, ": a weight or bias wider than the input must be a leaf");
  const kernels::ChannelLayout layout =
      checked_batch_norm_layout(x, weight, bias, running_mean, running_var, training, eps);
  if (residual.defined())
    check(residual.shape() == x.shape(), op, ": residual ", residual.shape(), " for input ", x.shape(),
          ", expected the input's shape");
  const std::int64_t C = layout.channels, M = layout.count();
  const bool has_weight = weight.defined(), has_bias = bias.defined(), has_residual = residual.defined();
  const bool tracked = running_mean.defined() || running_var.defined();
  const kernels::executor_for<D> ex;
  const W* w = has_weight ? weight.value().data() : nullptr;
  const W* b = has_bias ? bias.value().data() : nullptr;
  const T* r = has_residual ? residual.value().data() : nullptr;
  // [mean | invstd] per channel, kept on the device for backward.
  Tensor<double, D> statistics(Shape{2 * C});
  double* mean = statistics.data();
  double* invstd = mean + C;
  Tensor<T, D> y(x.shape());
  const bool synced = training && sync;
  double count = static_cast<double>(M);  // elements per channel the statistics are taken over
  if (training) {
    Tensor<double, D> var(Shape{C});
    if (synced) {
      if (M > 0) kernels::batch_norm_moments(ex, x.value().data(), layout, mean, var.data());
      count = merge_replica_moments(ex, C, count, sync, mean, var.data());
      check_global_batch_norm_count(count, x.shape());
      kernels::batch_norm_invstd(ex, var.data(), C, eps, invstd);
      kernels::batch_norm_forward_inference(ex, x.value().data(), layout, w, b, mean, invstd, y.data(), r, relu);
    } else {
      check_batch_norm_training_count(M, x.shape());
      kernels::batch_norm_forward_training(ex, x.value().data(), layout, w, b, eps, y.data(), mean, var.data(), r,
                                           relu);
      kernels::batch_norm_invstd(ex, var.data(), C, eps, invstd);
    }
    if (tracked)
      kernels::batch_norm_update_running(ex, mean, var.data(), C, momentum, count, running_mean.data(),
                                         running_var.data());
  } else {
    kernels::batch_norm_running_statistics(ex, running_mean.data(), running_var.data(), C, eps, mean, invstd);
    kernels::batch_norm_forward_inference(ex, x.value().data(), layout, w, b, mean, invstd, y.data(), r, relu);
  }

  std::vector<Var<T, D>> inputs{x};
  const std::size_t residual_at = has_residual ? inputs.size() : 0;
  if (has_residual) inputs.push_back(residual);
  std::size_t weight_at = 0, bias_at = 0;
  Var<W, D> wide_weight, wide_bias;  // wide_affine's weight and bias, outside T's graph
  if constexpr (wide_affine) {
    wide_weight = weight;
    wide_bias = bias;
  } else {
    weight_at = has_weight ? inputs.size() : 0;
    if (has_weight) inputs.push_back(weight);
    bias_at = has_bias ? inputs.size() : 0;
    if (has_bias) inputs.push_back(bias);
  }
  auto backward = [layout, training, relu, residual_at, weight_at, bias_at, wide_weight, wide_bias, statistics,
                   sync = synced ? sync : BatchNormSync(), count](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const std::int64_t C = layout.channels;
    const bool need_x = self.input_needs_grad(0);
    const bool need_r = residual_at && self.input_needs_grad(residual_at);
    bool need_w = false, need_b = false;
    const W* w = nullptr;
    if constexpr (wide_affine) {
      need_w = wide_weight.defined() && wide_weight.requires_grad();
      need_b = wide_bias.defined() && wide_bias.requires_grad();
      w = wide_weight.defined() ? wide_weight.value().data() : nullptr;
    } else {
      need_w = weight_at && self.input_needs_grad(weight_at);
      need_b = bias_at && self.input_needs_grad(bias_at);
      w = weight_at ? self.inputs[weight_at]->value.data() : nullptr;
    }
    const double* mean = statistics.data();
    // [sum(gy) | sum(gy * xhat)] per channel: the bias and weight gradients.
    Tensor<double, D> sums(Shape{2 * C});
    Tensor<T, D> gx, gr;
    Tensor<W, D> gw, gb;
    if (need_x) gx = Tensor<T, D>(self.inputs[0]->value.shape());
    if (need_r) gr = Tensor<T, D>(self.inputs[0]->value.shape());
    if (need_w) gw = Tensor<W, D>(Shape{C});
    if (need_b) gb = Tensor<W, D>(Shape{C});
    const T* x = self.inputs[0]->value.data();
    const T* gy = self.grad.data();  // batch norm's output gradient: after relu's mask when fused
    Tensor<T, D> masked;
    if (relu && sync) {  // the mask first, then the synchronised backward below on the masked gradient
      masked = need_r ? gr : Tensor<T, D>(self.grad.shape());
      kernels::batch_norm_relu_backward(ex, x, self.value.data(), gy, layout, w, mean, mean + C, training,
                                        static_cast<T*>(nullptr), masked.data(), sums.data(), sums.data() + C);
      gy = masked.data();
    }
    // Synchronised, the sums are sum(gy) and sum(gy * (x - mean)): the weight gradient takes invstd.
    if (sync)
      kernels::batch_norm_backward_sums(ex, x, gy, layout, mean, sums.data(), sums.data() + C);
    else if (relu)
      kernels::batch_norm_relu_backward(ex, x, self.value.data(), gy, layout, w, mean, mean + C, training,
                                        need_x ? gx.data() : nullptr, need_r ? gr.data() : nullptr, sums.data(),
                                        sums.data() + C);
    else
      kernels::batch_norm_backward(ex, x, gy, layout, w, mean, mean + C, training, need_x ? gx.data() : nullptr,
                                   sums.data(), sums.data() + C);
    if (need_w || need_b)
      kernels::batch_norm_affine_grads(ex, sums.data(), sums.data() + C, sync ? mean + C : nullptr, C,
                                       need_w ? gw.data() : nullptr, need_b ? gb.data() : nullptr);
    if constexpr (wide_affine) {
      // A leaf's last contribution: its hook (data parallelism's bucketing) fires now, as the
      // backward pass fires it for a leaf of T's graph.
      for (auto [leaf, g] : {std::pair{wide_weight.node().get(), &gw}, std::pair{wide_bias.node().get(), &gb}})
        if (g->defined()) {
          leaf->accumulate(std::move(*g));
          if (leaf->on_grad_ready) leaf->on_grad_ready(*leaf);
        }
    } else {
      if (need_w) self.inputs[weight_at]->accumulate(std::move(gw));
      if (need_b) self.inputs[bias_at]->accumulate(std::move(gb));
    }
    if (need_r) self.inputs[residual_at]->accumulate(std::move(gr));
    if (need_x && sync) {
      sync(std::span(sums.data(), static_cast<std::size_t>(2 * C)));  // now over the global batch
      kernels::batch_norm_backward_input(ex, x, gy, layout, w, mean, mean + C, sums.data(), sums.data() + C, count,
                                         gx.data());
    }
    if (need_x) self.inputs[0]->accumulate(std::move(gx));
  };
  if constexpr (wide_affine) {
    // The op needs a node when only its wide weight or bias needs a gradient, which make_var,
    // seeing T's inputs alone, would not give it.
    const bool wide_needs = (weight.defined() && weight.requires_grad()) || (bias.defined() && bias.requires_grad());
    if (wide_needs && GradMode::enabled()) {
      auto node = std::make_shared<Node<T, D>>();
      node->value = std::move(y);
      node->requires_grad = true;
      node->op = op;
      for (auto& in : inputs) node->inputs.push_back(in.node());
      node->backward = std::move(backward);
      return Var<T, D>(std::move(node));
    }
  }
  return make_var<T, D>(std::move(y), std::move(inputs), op, std::move(backward));
}
}  // namespace detail

// training: normalise by the batch mean and biased variance of each channel and move the running
// statistics towards them (running = (1 - momentum) * running + momentum * batch, the variance
// unbiased), in place, whether or not gradients are recorded. Not training: normalise by the
// running statistics. Their type S may be wider than x's (float beside half, as BatchNorm2d keeps
// them in a 16-bit model). weight and bias (each [C]) may be undefined, as with affine=False; running
// statistics may be undefined in training (track_running_stats=False), when nothing is updated.
// With a sync hook, training is torch.nn.SyncBatchNorm's: the statistics are those of the global
// batch (the union of every replica's x, whose batch sizes may differ), and backward sums the
// per-channel sums of the gradient over the replicas before computing x's gradient; weight and
// bias gradients stay local (data parallelism sums or averages them like any other). The hook is
// called twice in forward (count and sums, then squared deviations from the global mean: Chan's
// parallel variance, no cancellation with a large mean) and once in backward when x needs a
// gradient.
// Evaluation never calls it. On a device the hook is given spans of doubles in D's memory (a
// communicator moving that memory sums them: NcclComm on Cuda, a host one on Cpu and HostEmulated).
template <class T, Device D, class S>
Var<T, D> batch_norm(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias, Tensor<S, D>& running_mean,
                     Tensor<S, D>& running_var, bool training, double momentum = 0.1, double eps = 1e-5,
                     const BatchNormSync& sync = {}) {
  return detail::batch_norm_op(x, Var<T, D>(), false, weight, bias, running_mean, running_var, training, momentum,
                               eps, sync, "batch_norm");
}

// relu(batch_norm(x, ...)) as one op: the same statistics, running-statistics update and sync as
// batch_norm, the output written once, and a backward that masks the gradient by the output
// (relu's, NaN passing) inside batch norm's own pass. Weight and bias of x's type or, as with
// batch_norm, float beside a 16-bit x.
template <class T, Device D, class W, class S>
Var<T, D> batch_norm_relu(const Var<T, D>& x, const Var<W, D>& weight, const Var<W, D>& bias,
                          Tensor<S, D>& running_mean, Tensor<S, D>& running_var, bool training,
                          double momentum = 0.1, double eps = 1e-5, const BatchNormSync& sync = {}) {
  return detail::batch_norm_op(x, Var<T, D>(), true, weight, bias, running_mean, running_var, training, momentum,
                               eps, sync, "batch_norm_relu");
}

// relu(batch_norm(x, ...) + residual) as one op (a ResNet block's end), residual of x's shape; it
// gets the masked gradient. As batch_norm_relu otherwise.
template <class T, Device D, class W, class S>
Var<T, D> batch_norm_add_relu(const Var<T, D>& x, const Var<T, D>& residual, const Var<W, D>& weight,
                              const Var<W, D>& bias, Tensor<S, D>& running_mean, Tensor<S, D>& running_var,
                              bool training, double momentum = 0.1, double eps = 1e-5,
                              const BatchNormSync& sync = {}) {
  check(residual.defined(), "batch_norm_add_relu: the residual is undefined");
  return detail::batch_norm_op(x, residual, true, weight, bias, running_mean, running_var, training, momentum, eps,
                               sync, "batch_norm_add_relu");
}

// batch_norm with weight and bias wider than x (float beside half or bfloat16: Apex O2's
// keep_batchnorm_fp32, the affine parameters a 16-bit model keeps in float). The kernels read x in
// its own type and the float weight as it is, compute in float and round y once; weight and bias,
// which must be leaves (parameters), get float gradients, their on_grad_ready hooks firing as in
// any backward pass.
template <class T, Device D, class W, class S>
  requires(!std::is_same_v<T, W>)
Var<T, D> batch_norm(const Var<T, D>& x, const Var<W, D>& weight, const Var<W, D>& bias, Tensor<S, D>& running_mean,
                     Tensor<S, D>& running_var, bool training, double momentum = 0.1, double eps = 1e-5,
                     const BatchNormSync& sync = {}) {
  return detail::batch_norm_op(x, Var<T, D>(), false, weight, bias, running_mean, running_var, training, momentum,
                               eps, sync, "batch_norm");
}

}  // namespace ptrain

PTRAIN_PREBUILT_OP(ptrain::detail::batch_norm_op<float, ::ptrain::Cpu, float>)
PTRAIN_PREBUILT_OP(ptrain::detail::batch_norm_op<double, ::ptrain::Cpu, double>)
