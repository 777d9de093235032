#pragma once
// PyTorch's default initialisations (torch.nn.init), drawn from a given Rng.
#include <cmath>
#include <type_traits>

#include "ptrain/core/rng.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::init {

template <class T>
void uniform(Tensor<T>& t, double lo, double hi, Rng& rng = global_rng()) {
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<T>(rng.uniform(lo, hi));
}
// Marsaglia's polar method on raw engine draws, both values of each pair used: about four times
// faster than a std::normal_distribution per element (Rng::normal), which made VGG-16's 138M
// weights a 7 s wait.
template <class T>
void normal(Tensor<T>& t, double mean, double stddev, Rng& rng = global_rng()) {
  auto& engine = rng.engine();
  auto signed_unit = [&engine] { return static_cast<double>(engine() >> 11) * 0x1.0p-52 - 1.0; };  // [-1, 1)
  const std::int64_t n = t.numel();
  for (std::int64_t i = 0; i < n; i += 2) {
    double u, v, s;
    do {
      u = signed_unit();
      v = signed_unit();
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double scale = stddev * std::sqrt(-2.0 * std::log(s) / s);
    t[i] = static_cast<T>(mean + u * scale);
    if (i + 1 < n) t[i + 1] = static_cast<T>(mean + v * scale);
  }
}

// trunc_normal_(mean, std, a, b): normal values redrawn until they fall in [a, b] (absolute bounds,
// as torch's). Same distribution as torch's inverse-CDF sampling, not the same numbers. The mean
// must lie in [a, b] so that redrawing ends quickly.
template <class T>
void trunc_normal(Tensor<T>& t, double mean, double stddev, double a, double b, Rng& rng = global_rng()) {
  check(a <= mean && mean <= b, "trunc_normal: mean ", mean, " lies outside [", a, ", ", b, "]");
  normal(t, mean, stddev, rng);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    while (t[i] < a || t[i] > b) t[i] = static_cast<T>(rng.normal(mean, stddev));
}

// fan_in of a weight [out, in, k...]: in * prod(k).
template <class T>
std::int64_t fan_in(const Tensor<T>& weight) {
  return weight.rank() >= 2 ? weight.numel() / weight.size(0) : weight.numel();
}
template <class T>
std::int64_t fan_out(const Tensor<T>& weight) {
  return weight.rank() >= 2 ? weight.numel() / weight.size(1) : weight.numel();
}

// kaiming_uniform_(a): bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)).
template <class T>
void kaiming_uniform(Tensor<T>& weight, double a, Rng& rng = global_rng()) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(fan_in(weight)));
  uniform(weight, -bound, bound, rng);
}
// xavier_uniform_: bound = sqrt(6 / (fan_in + fan_out)) (nn.MultiheadAttention's in_proj_weight).
template <class T>
void xavier_uniform(Tensor<T>& weight, Rng& rng = global_rng()) {
  const double bound = std::sqrt(6.0 / static_cast<double>(fan_in(weight) + fan_out(weight)));
  uniform(weight, -bound, bound, rng);
}
// kaiming_normal_(mode='fan_out', nonlinearity='relu'): what torchvision's ResNet uses.
template <class T>
void kaiming_normal_fan_out(Tensor<T>& weight, Rng& rng = global_rng()) {
  normal(weight, 0.0, std::sqrt(2.0 / static_cast<double>(fan_out(weight))), rng);
}

// nn.Linear / nn.Conv2d reset_parameters(): weight kaiming_uniform(a=sqrt(5)), i.e. U(±1/sqrt(fan_in));
// bias U(±1/sqrt(fan_in)).
template <class T>
void default_layer_init(Tensor<T>& weight, Tensor<T>* bias, Rng& rng = global_rng()) {
  kaiming_uniform(weight, std::sqrt(5.0), rng);
  if (bias && bias->defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in(weight)));
    uniform(*bias, -bound, bound, rng);
  }
}

// Runs a host initialiser on a tensor of any device: in place on the CPU, through a host copy
// elsewhere (the same draws either way).
template <class T, class D, class Init>
void on_host(Tensor<T, D>& t, Init&& init) {
  Tensor<T> host = t.template to<Cpu>();
  init(host);
  t.copy_from(host.template to<D>());
}
template <class T, class Init>
void on_host(Tensor<T>& t, Init&& init) {
  init(t);
}

}  // namespace ptrain::init
