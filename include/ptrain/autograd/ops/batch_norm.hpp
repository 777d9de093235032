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

  std::vector<double> mean(static_cast<std::size_t>(C)), invstd(static_cast<std::size_t>(C));
  if (training) {
    check(M > 1, "batch_norm: expected more than 1 value per channel when training, got input ", s);
    std::vector<double> var(static_cast<std::size_t>(C));
    kernels::channel_moments(x.value().data(), layout, mean.data(), var.data());
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
  }

  std::vector<T> scale(static_cast<std::size_t>(C)), shift(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) {
    const auto i = static_cast<std::size_t>(c);
    const double w = has_weight ? static_cast<double>(weight.value()[c]) : 1.0;
    const double b = has_bias ? static_cast<double>(bias.value()[c]) : 0.0;
    scale[i] = static_cast<T>(w * invstd[i]);
    shift[i] = static_cast<T>(b - mean[i] * w * invstd[i]);
  }
  Tensor<T> y(s);
  kernels::channel_affine(x.value().data(), layout, scale.data(), shift.data(), y.data());

  std::vector<Var<T>> inputs{x};
  const std::size_t weight_at = has_weight ? inputs.size() : 0;
  if (has_weight) inputs.push_back(weight);
  const std::size_t bias_at = has_bias ? inputs.size() : 0;
  if (has_bias) inputs.push_back(bias);
  return make_var<T>(std::move(y), std::move(inputs), "batch_norm",
                     [layout, training, weight_at, bias_at, mean = std::move(mean), invstd = std::move(invstd)](Node<T>& self) {
    const std::int64_t C = layout.channels;
    const auto M = static_cast<double>(layout.count());
    const bool need_x = self.input_needs_grad(0);
    const bool need_w = weight_at && self.input_needs_grad(weight_at);
    const bool need_b = bias_at && self.input_needs_grad(bias_at);
    const T* gy = self.grad.data();
    const T* x = self.inputs[0]->value.data();
    std::vector<double> sum_gy(static_cast<std::size_t>(C)), sum_gy_xc(static_cast<std::size_t>(C));
    if (need_w || need_b || (need_x && training))
      kernels::channel_grad_sums(gy, x, layout, mean.data(), sum_gy.data(), sum_gy_xc.data());
    if (need_x) {
      // gx = w * invstd * (gy - mean(gy) - xhat * mean(gy * xhat)) in training, w * invstd * gy
      // in evaluation; both are a*gy + b*x + d per channel.
      std::vector<T> a(static_cast<std::size_t>(C)), b(a.size()), d(a.size());
      for (std::int64_t c = 0; c < C; ++c) {
        const auto i = static_cast<std::size_t>(c);
        const double w = weight_at ? static_cast<double>(self.inputs[weight_at]->value[c]) : 1.0;
        const double on_gy = w * invstd[i];
        const double on_x = training ? -on_gy * invstd[i] * invstd[i] * sum_gy_xc[i] / M : 0.0;
        const double constant = training ? -on_gy * sum_gy[i] / M - on_x * mean[i] : 0.0;
        a[i] = static_cast<T>(on_gy);
        b[i] = static_cast<T>(on_x);
        d[i] = static_cast<T>(constant);
      }
      Tensor<T> gx(self.inputs[0]->value.shape());
      kernels::channel_affine2(gy, x, layout, a.data(), b.data(), d.data(), gx.data());
      self.inputs[0]->accumulate(std::move(gx));
    }
    if (need_w) {
      Tensor<T> gw({C});
      for (std::int64_t c = 0; c < C; ++c)
        gw[c] = static_cast<T>(sum_gy_xc[static_cast<std::size_t>(c)] * invstd[static_cast<std::size_t>(c)]);
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
