#pragma once
// batch_norm, as torch.nn.functional.batch_norm on [N, C] or [N, C, H, W].
#include <cmath>
#include <cstdint>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/cpu/batch_norm.hpp"

namespace ptrain {

// training: normalise by the batch mean and biased variance of each channel and move the running
// statistics towards them (running = (1 - momentum) * running + momentum * batch, the variance
// unbiased), in place, whether or not gradients are recorded. Not training: normalise by the
// running statistics. weight and bias (each [C]) may be undefined, as with affine=False; running
// statistics may be undefined in training (track_running_stats=False), when nothing is updated.
template <class T>
Var<T> batch_norm(const Var<T>& x, const Var<T>& weight, const Var<T>& bias, Tensor<T>& running_mean,
                  Tensor<T>& running_var, bool training, double momentum = 0.1, double eps = 1e-5) {
  const Shape& s = x.shape();
  check(s.rank() == 2 || s.rank() == 4, "batch_norm: input must be [N, C] or [N, C, H, W], got ", s);
  const kernels::ChannelLayout layout{s[0], s[1], s.rank() == 4 ? s[2] * s[3] : 1};
  const std::int64_t C = layout.channels, M = layout.count();
  const Shape channel_shape{C};
  const bool has_weight = weight.defined(), has_bias = bias.defined();
  if (has_weight)
    check(weight.shape() == channel_shape, "batch_norm: weight ", weight.shape(), " for input ", s, ", expected [", C,
          "]");
  if (has_bias)
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

  const T* w = has_weight ? weight.value().data() : nullptr;
  const T* b = has_bias ? bias.value().data() : nullptr;
  std::vector<double> mean(static_cast<std::size_t>(C)), invstd(static_cast<std::size_t>(C));
  Tensor<T> y(s);
  if (training) {
    check(M > 1, "batch_norm: expected more than 1 value per channel when training, got input ", s);
    std::vector<double> var(static_cast<std::size_t>(C));
    kernels::batch_norm_forward_training(x.value().data(), layout, w, b, eps, y.data(), mean.data(), var.data());
    const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
    for (std::int64_t c = 0; c < C; ++c) {
      const auto i = static_cast<std::size_t>(c);
      invstd[i] = 1.0 / std::sqrt(var[i] + eps);
      if (tracked) {
        running_mean[c] = static_cast<T>((1 - momentum) * running_mean[c] + momentum * mean[i]);
        running_var[c] = static_cast<T>((1 - momentum) * running_var[c] + momentum * var[i] * unbias);
      }
    }
  } else {
    for (std::int64_t c = 0; c < C; ++c) {
      const auto i = static_cast<std::size_t>(c);
      mean[i] = static_cast<double>(running_mean[c]);
      invstd[i] = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + eps);
    }
    kernels::batch_norm_forward_inference(x.value().data(), layout, w, b, mean.data(), invstd.data(), y.data());
  }

  std::vector<Var<T>> inputs{x};
  const std::size_t weight_at = has_weight ? inputs.size() : 0;
  if (has_weight) inputs.push_back(weight);
  const std::size_t bias_at = has_bias ? inputs.size() : 0;
  if (has_bias) inputs.push_back(bias);
  return make_var<T>(std::move(y), std::move(inputs), "batch_norm",
                     [layout, training, weight_at, bias_at, mean = std::move(mean), invstd = std::move(invstd)](Node<T>& self) {
    const std::int64_t C = layout.channels;
    const bool need_x = self.input_needs_grad(0);
    const bool need_w = weight_at && self.input_needs_grad(weight_at);
    const bool need_b = bias_at && self.input_needs_grad(bias_at);
    std::vector<double> sum_gy(static_cast<std::size_t>(C)), sum_gy_xhat(static_cast<std::size_t>(C));
    Tensor<T> gx;
    if (need_x) gx = Tensor<T>(self.inputs[0]->value.shape());
    kernels::batch_norm_backward(self.inputs[0]->value.data(), self.grad.data(), layout,
                                 weight_at ? self.inputs[weight_at]->value.data() : nullptr, mean.data(),
                                 invstd.data(), training, need_x ? gx.data() : nullptr, sum_gy.data(),
                                 sum_gy_xhat.data());
    if (need_x) self.inputs[0]->accumulate(std::move(gx));
    if (need_w) {
      Tensor<T> gw({C});
      for (std::int64_t c = 0; c < C; ++c) gw[c] = static_cast<T>(sum_gy_xhat[static_cast<std::size_t>(c)]);
      self.inputs[weight_at]->accumulate(std::move(gw));
    }
    if (need_b) {
      Tensor<T> gb({C});
      for (std::int64_t c = 0; c < C; ++c) gb[c] = static_cast<T>(sum_gy[static_cast<std::size_t>(c)]);
      self.inputs[bias_at]->accumulate(std::move(gb));
    }
  });
}

}  // namespace ptrain
