#pragma once
// batch_norm on a device other than Cpu (HostEmulated, Cuda): the CPU op's checks and semantics
// (training with the running statistics updated in place on the device, or evaluation from them),
// the channel reductions of kernels/indexed/batch_norm.hpp through executor_for<D>, and the sync
// hook of torch.nn.SyncBatchNorm, whose spans then point into the device's memory.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ptrain/autograd/ops/batch_norm.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/batch_norm.hpp"

namespace ptrain {

// As the CPU batch_norm: x [N, C] or [N, C, H, W]; weight, bias [C] or undefined; running_mean
// and running_var [C] device tensors (undefined in training means track_running_stats=False). A
// sync hook is given spans of doubles in D's memory (a communicator moving that memory sums them:
// NcclComm on Cuda, a host one on HostEmulated), called as the CPU op calls it.
template <class T, kernels::ExecutorDevice D>
Var<T, D> batch_norm(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias, Tensor<T, D>& running_mean,
                     Tensor<T, D>& running_var, bool training, double momentum = 0.1, double eps = 1e-5,
                     const BatchNormSync& sync = {}) {
  const kernels::ChannelLayout layout =
      detail::checked_batch_norm_layout(x, weight, bias, running_mean, running_var, training, eps);
  const std::int64_t C = layout.channels, M = layout.count();
  const bool has_weight = weight.defined(), has_bias = bias.defined();
  const bool tracked = running_mean.defined() || running_var.defined();
  const kernels::executor_for<D> ex;
  const T* w = has_weight ? weight.value().data() : nullptr;
  const T* b = has_bias ? bias.value().data() : nullptr;
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
      if (M > 0) kernels::indexed::batch_norm_moments(ex, x.value().data(), layout, mean, var.data());
      count = detail::merge_replica_moments(ex, C, count, sync, mean, var.data());
      detail::check_global_batch_norm_count(count, x.shape());
      kernels::indexed::batch_norm_invstd(ex, var.data(), C, eps, invstd);
      kernels::indexed::batch_norm_forward_inference(ex, x.value().data(), layout, w, b, mean, invstd, y.data());
    } else {
      detail::check_batch_norm_training_count(M, x.shape());
      kernels::indexed::batch_norm_forward_training(ex, x.value().data(), layout, w, b, eps, y.data(), mean,
                                                    var.data());
      kernels::indexed::batch_norm_invstd(ex, var.data(), C, eps, invstd);
    }
    if (tracked)
      kernels::indexed::batch_norm_update_running(ex, mean, var.data(), C, momentum, count, running_mean.data(),
                                                  running_var.data());
  } else {
    kernels::indexed::batch_norm_running_statistics(ex, running_mean.data(), running_var.data(), C, eps, mean,
                                                    invstd);
    kernels::indexed::batch_norm_forward_inference(ex, x.value().data(), layout, w, b, mean, invstd, y.data());
  }

  std::vector<Var<T, D>> inputs{x};
  const std::size_t weight_at = has_weight ? inputs.size() : 0;
  if (has_weight) inputs.push_back(weight);
  const std::size_t bias_at = has_bias ? inputs.size() : 0;
  if (has_bias) inputs.push_back(bias);
  return make_var<T, D>(std::move(y), std::move(inputs), "batch_norm",
                        [layout, training, weight_at, bias_at, statistics, sync = synced ? sync : BatchNormSync(),
                         count](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const std::int64_t C = layout.channels;
    const bool need_x = self.input_needs_grad(0);
    const bool need_w = weight_at && self.input_needs_grad(weight_at);
    const bool need_b = bias_at && self.input_needs_grad(bias_at);
    const double* mean = statistics.data();
    const T* w = weight_at ? self.inputs[weight_at]->value.data() : nullptr;
    // [sum(gy) | sum(gy * xhat)] per channel: the bias and weight gradients.
    Tensor<double, D> sums(Shape{2 * C});
    Tensor<T, D> gx, gw, gb;
    if (need_x) gx = Tensor<T, D>(self.inputs[0]->value.shape());
    if (need_w) gw = Tensor<T, D>(Shape{C});
    if (need_b) gb = Tensor<T, D>(Shape{C});
    const T* x = self.inputs[0]->value.data();
    // Synchronised, the sums are sum(gy) and sum(gy * (x - mean)): the weight gradient takes invstd.
    if (sync)
      kernels::indexed::batch_norm_backward_sums(ex, x, self.grad.data(), layout, mean, sums.data(), sums.data() + C);
    else
      kernels::indexed::batch_norm_backward(ex, x, self.grad.data(), layout, w, mean, mean + C, training,
                                            need_x ? gx.data() : nullptr, sums.data(), sums.data() + C);
    if (need_w || need_b)
      kernels::indexed::batch_norm_affine_grads(ex, sums.data(), sums.data() + C, sync ? mean + C : nullptr, C,
                                                need_w ? gw.data() : nullptr, need_b ? gb.data() : nullptr);
    if (need_w) self.inputs[weight_at]->accumulate(std::move(gw));
    if (need_b) self.inputs[bias_at]->accumulate(std::move(gb));
    if (need_x && sync) {
      sync(std::span(sums.data(), static_cast<std::size_t>(2 * C)));  // now over the global batch
      kernels::indexed::batch_norm_backward_input(ex, x, self.grad.data(), layout, w, mean, mean + C, sums.data(),
                                                  sums.data() + C, count, gx.data());
    }
    if (need_x) self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain
