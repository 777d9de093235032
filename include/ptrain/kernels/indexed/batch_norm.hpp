#pragma once
// Executor-generic batch normalisation over x seen as [outer, C, inner] (kernels/cpu/batch_norm.hpp's
// entry points for a GPU): per-channel sums are row reductions in double (a channel's outer * inner
// elements a row), whose finish also turns them into per-channel coefficients; an indexed kernel then
// applies y = x * a + b (or gx = gy * a + x * b + d). Plus the per-channel steps autograd/ops/
// batch_norm.hpp does around the kernels: invstd, running statistics, weight and bias gradients.
// The forward's apply may add a residual and apply relu, and the backward mask the gradient by the
// relu output (batch norm + add + relu fused, as the CPU kernels).
// All pointers are the executor's (device pointers on a GPU), double arrays included.
#include <cmath>
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"

namespace ptrain::kernels::indexed {

struct TwoSums {
  double s1, s2;
};
struct TwoSumsReduction {
  using accumulator = TwoSums;
  PTRAIN_HOST_DEVICE TwoSums identity() const { return {0.0, 0.0}; }
  PTRAIN_HOST_DEVICE TwoSums combine(TwoSums a, TwoSums b) const { return {a.s1 + b.s1, a.s2 + b.s2}; }
};

// Per channel, mean and biased variance from sums of x - x[first of c] (as the CPU: a large mean
// does not cancel the variance away). With scale non-null (the fused training forward) also
// scale = weight / sqrt(var + eps) and shift = bias - mean * scale. Weight and bias are of x's type
// or wider (W: float beside a 16-bit x, BatchNorm2d's in a 16-bit model).
template <class T, class W = T>
struct ChannelMoments : TwoSumsReduction {
  using A = accumulate_t<T>;
  const T* x;
  ChannelLayout l;
  double* mean;
  double* var;
  const W* weight;
  const W* bias;
  double eps;
  A* scale;
  A* shift;
  PTRAIN_HOST_DEVICE TwoSums term(std::int64_t c, std::int64_t j) const {
    const double d = load_double(x, channel_element(l, c, j)) - load_double(x, c * l.inner);
    return {d, d * d};
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t c, TwoSums total) const {
    using std::sqrt;
    const double m = static_cast<double>(l.outer * l.inner), centred = total.s1 / m;
    const double mu = load_double(x, c * l.inner) + centred;
    const double v = total.s2 / m - centred * centred;
    mean[c] = mu;
    var[c] = v < 0.0 ? 0.0 : v;  // rounding can go below 0; NaN stays
    if (!scale) return;
    const double a = load_or(weight, c, 1.0) / sqrt(var[c] + eps);
    scale[c] = static_cast<A>(a);
    shift[c] = static_cast<A>(load_or(bias, c, 0.0) - mu * a);
  }
};

// Per channel, from given statistics: scale = weight * invstd, shift = bias - mean * scale.
template <class T, class W = T>
struct ChannelAffineCoefficients {
  using A = accumulate_t<T>;
  const W* weight;
  const W* bias;
  const double* mean;
  const double* invstd;
  A* scale;
  A* shift;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const {
    const double a = load_or(weight, c, 1.0) * invstd[c];
    scale[c] = static_cast<A>(a);
    shift[c] = static_cast<A>(load_or(bias, c, 0.0) - mean[c] * a);
  }
};

// y = x * scale[c] + shift[c], plus residual[i] where residual is not null, then relu when asked.
template <class T>
struct ChannelAffine {
  using A = accumulate_t<T>;
  const T* x;
  const A* scale;
  const A* shift;
  T* y;
  std::int64_t channels, inner;
  const T* residual = nullptr;
  bool relu = false;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t c = (i / inner) % channels;
    A v = to_accumulate(x[i]) * scale[c] + shift[c];
    if (residual) v += to_accumulate(residual[i]);
    if (relu && !kernels::detail::passes_relu(v)) v = A(0);
    y[i] = from_accumulate<T>(v);
  }
};

// gy[i] where relu's output y passed (or y is null: no relu), else 0; widened.
template <class T>
PTRAIN_HOST_DEVICE accumulate_t<T> relu_masked(const T* y, const T* gy, std::int64_t i) {
  return !y || kernels::detail::passes_relu(y[i]) ? to_accumulate(gy[i]) : accumulate_t<T>(0);
}

// Coefficients of gx = on_gy * gy + on_x * x + constant for channel c (the CPU's
// channel_backward_input): on_gy = w * invstd, and in training (statistics depend on x)
// on_x = -on_gy * invstd^2 * s2 / m, constant = -on_gy * s1 / m - on_x * mean, with s1 = sum(gy)
// and s2 = sum(gy * (x - mean)) taken over m elements.
template <class A>
PTRAIN_HOST_DEVICE void backward_coefficients(double weight, double mean, double invstd, bool training, double s1,
                                              double s2, double m, A* on_gy, A* on_x, A* constant) {
  const double a = weight * invstd;
  const double b = training ? -a * invstd * invstd * s2 / m : 0.0;
  *on_gy = static_cast<A>(a);
  *on_x = static_cast<A>(b);
  *constant = static_cast<A>(training ? -a * s1 / m - b * mean : 0.0);
}

// Per channel, s1 = sum(gy) and s2 = sum(gy * (x - mean)). finish writes sum_gy = s1 and
// second = s2 (times invstd when invstd is given), and with on_gy non-null the coefficients of gx.
template <class T, class W = T>
struct ChannelBackwardSums : TwoSumsReduction {
  using A = accumulate_t<T>;
  const T* x;
  const T* gy;
  ChannelLayout l;
  const double* mean;
  const double* invstd;
  double* sum_gy;
  double* second;
  const W* weight;
  bool training;
  A* on_gy;                       // [3 * C]: on_gy, on_x, constant
  const T* relu_output = nullptr;  // not null: gy is first masked by relu's output
  PTRAIN_HOST_DEVICE TwoSums term(std::int64_t c, std::int64_t j) const {
    const std::int64_t at = channel_element(l, c, j);
    const double g = static_cast<double>(relu_masked(relu_output, gy, at));
    return {g, g * (load_double(x, at) - mean[c])};
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t c, TwoSums total) const {
    sum_gy[c] = total.s1;
    second[c] = invstd ? total.s2 * invstd[c] : total.s2;
    if (!on_gy) return;
    const std::int64_t C = l.channels;
    backward_coefficients(load_or(weight, c, 1.0), mean[c], invstd[c], training, total.s1, total.s2,
                          static_cast<double>(l.outer * l.inner), on_gy + c, on_gy + C + c, on_gy + 2 * C + c);
  }
};

// The coefficients of gx from sums already taken (over `count` elements per channel).
template <class T, class W = T>
struct ChannelBackwardCoefficients {
  using A = accumulate_t<T>;
  const W* weight;
  const double* mean;
  const double* invstd;
  const double* sum_gy;
  const double* sum_gy_xmu;
  double count;
  std::int64_t channels;
  A* on_gy;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const {
    backward_coefficients(load_or(weight, c, 1.0), mean[c], invstd[c], true, sum_gy[c], sum_gy_xmu[c], count,
                          on_gy + c, on_gy + channels + c, on_gy + 2 * channels + c);
  }
};

// gx = gy * on_gy[c] + x * on_x[c] + constant[c], gy first masked by relu_output when not null
// (and then written to grad_residual when not null); gx may be null.
template <class T>
struct ChannelBackwardApply {
  using A = accumulate_t<T>;
  const T* x;
  const T* gy;
  const A* on_gy;
  T* gx;
  std::int64_t channels, inner;
  const T* relu_output = nullptr;
  T* grad_residual = nullptr;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t c = (i / inner) % channels;
    const A g = relu_masked(relu_output, gy, i);
    if (grad_residual) grad_residual[i] = from_accumulate<T>(g);
    if (gx)
      gx[i] = from_accumulate<T>(g * on_gy[c] + to_accumulate(x[i]) * on_gy[channels + c] +
                                 on_gy[2 * channels + c]);
  }
};

inline void check_channel_layout(const ChannelLayout& l, const char* op) {
  check(l.outer >= 0 && l.channels >= 0 && l.inner >= 1, op, ": bad layout [outer ", l.outer, ", channels ",
        l.channels, ", inner ", l.inner, "]");
}

// Training forward: mean and biased variance per channel, y = (x - mean) / sqrt(var + eps) *
// weight + bias (weight, bias may be null), then + residual where not null and relu when asked.
// kernels::batch_norm_forward_training.
template <class T, class Ex, class W>
void batch_norm_forward_training(const Ex& ex, const T* x, const ChannelLayout& l, const W* weight, const W* bias,
                                 double eps, T* y, double* mean, double* var, const T* residual = nullptr,
                                 bool relu = false) {
  check_channel_layout(l, "batch_norm_forward_training");
  check(l.count() > 0, "batch_norm_forward_training: no values per channel in [", l.outer, ", ", l.channels, ", ",
        l.inner, "]");
  using A = accumulate_t<T>;
  auto coefficients = ex.template buffer<A>(2 * l.channels);
  A* scale = coefficients.data();
  A* shift = scale + l.channels;
  reduce_rows(ex, l.channels, l.count(), ChannelMoments<T, W>{{}, x, l, mean, var, weight, bias, eps, scale, shift},
              channel_runs_contiguous(l));
  ex.indexed(l.numel(), ChannelAffine<T>{x, scale, shift, y, l.channels, l.inner, residual, relu});
}

// Evaluation forward with given statistics: kernels::batch_norm_forward_inference.
template <class T, class Ex, class W>
void batch_norm_forward_inference(const Ex& ex, const T* x, const ChannelLayout& l, const W* weight, const W* bias,
                                  const double* mean, const double* invstd, T* y, const T* residual = nullptr,
                                  bool relu = false) {
  check_channel_layout(l, "batch_norm_forward_inference");
  using A = accumulate_t<T>;
  auto coefficients = ex.template buffer<A>(2 * l.channels);
  A* scale = coefficients.data();
  A* shift = scale + l.channels;
  ex.indexed(l.channels, ChannelAffineCoefficients<T, W>{weight, bias, mean, invstd, scale, shift});
  ex.indexed(l.numel(), ChannelAffine<T>{x, scale, shift, y, l.channels, l.inner, residual, relu});
}

// Backward given the forward's statistics: sum_gy[c] = sum(gy), sum_gy_xhat[c] = sum(gy * xhat),
// and gx when not null. kernels::batch_norm_backward.
template <class T, class Ex, class W>
void batch_norm_backward(const Ex& ex, const T* x, const T* gy, const ChannelLayout& l, const W* weight,
                         const double* mean, const double* invstd, bool training, T* gx, double* sum_gy,
                         double* sum_gy_xhat) {
  check_channel_layout(l, "batch_norm_backward");
  using A = accumulate_t<T>;
  auto coefficients = ex.template buffer<A>(gx ? 3 * l.channels : 1);
  A* on_gy = gx ? coefficients.data() : nullptr;
  reduce_rows(ex, l.channels, l.count(),
              ChannelBackwardSums<T, W>{{}, x, gy, l, mean, invstd, sum_gy, sum_gy_xhat, weight, training, on_gy},
              channel_runs_contiguous(l));
  if (gx) ex.indexed(l.numel(), ChannelBackwardApply<T>{x, gy, on_gy, gx, l.channels, l.inner});
}

// Backward of relu(bn(x) [+ residual]) given its output y: the sums and gx of batch_norm_backward
// on gy masked by relu, the masked gradient also written to grad_residual when not null (the
// residual's gradient). gx or grad_residual may be null. kernels::batch_norm_relu_backward.
template <class T, class Ex, class W>
void batch_norm_relu_backward(const Ex& ex, const T* x, const T* y, const T* gy, const ChannelLayout& l,
                              const W* weight, const double* mean, const double* invstd, bool training, T* gx,
                              T* grad_residual, double* sum_gy, double* sum_gy_xhat) {
  check_channel_layout(l, "batch_norm_relu_backward");
  using A = accumulate_t<T>;
  auto coefficients = ex.template buffer<A>(gx ? 3 * l.channels : 1);
  A* on_gy = gx ? coefficients.data() : nullptr;
  reduce_rows(ex, l.channels, l.count(),
              ChannelBackwardSums<T, W>{{}, x, gy, l, mean, invstd, sum_gy, sum_gy_xhat, weight, training, on_gy, y},
              channel_runs_contiguous(l));
  if (gx || grad_residual)
    ex.indexed(l.numel(), ChannelBackwardApply<T>{x, gy, on_gy, gx, l.channels, l.inner, y, grad_residual});
}

// SyncBatchNorm's halves (see the CPU kernels of the same names).

// Per channel, the mean and biased variance of x: kernels::batch_norm_moments.
template <class T, class Ex>
void batch_norm_moments(const Ex& ex, const T* x, const ChannelLayout& l, double* mean, double* var) {
  check_channel_layout(l, "batch_norm_moments");
  check(l.count() > 0, "batch_norm_moments: no values per channel in [", l.outer, ", ", l.channels, ", ", l.inner,
        "]");
  reduce_rows(ex, l.channels, l.count(),
              ChannelMoments<T>{{}, x, l, mean, var, nullptr, nullptr, 0.0, nullptr, nullptr},
              channel_runs_contiguous(l));
}

// sum_gy[c] = sum(gy), sum_gy_xmu[c] = sum(gy * (x - mean)): kernels::batch_norm_backward_sums.
template <class T, class Ex>
void batch_norm_backward_sums(const Ex& ex, const T* x, const T* gy, const ChannelLayout& l, const double* mean,
                              double* sum_gy, double* sum_gy_xmu) {
  check_channel_layout(l, "batch_norm_backward_sums");
  reduce_rows(ex, l.channels, l.count(),
              ChannelBackwardSums<T>{{}, x, gy, l, mean, nullptr, sum_gy, sum_gy_xmu, nullptr, true, nullptr},
              channel_runs_contiguous(l));
}

// Training gx from sums over `count` elements per channel: kernels::batch_norm_backward_input.
template <class T, class Ex, class W>
void batch_norm_backward_input(const Ex& ex, const T* x, const T* gy, const ChannelLayout& l, const W* weight,
                               const double* mean, const double* invstd, const double* sum_gy,
                               const double* sum_gy_xmu, double count, T* gx) {
  check_channel_layout(l, "batch_norm_backward_input");
  using A = accumulate_t<T>;
  auto coefficients = ex.template buffer<A>(3 * l.channels);
  ex.indexed(l.channels, ChannelBackwardCoefficients<T, W>{weight, mean, invstd, sum_gy, sum_gy_xmu, count, l.channels,
                                                        coefficients.data()});
  ex.indexed(l.numel(), ChannelBackwardApply<T>{x, gy, coefficients.data(), gx, l.channels, l.inner});
}

// SyncBatchNorm's merge of the replicas' statistics (Chan's parallel variance), around the two
// sums over the replicas of autograd/ops/batch_norm.hpp's merge_replica_moments. A replica with
// no values (count 0) adds zeros whatever its mean and var hold.

// sums[0] = count, sums[1 + c] = count * mean[c]: what the first sum adds up ([channels + 1]).
struct ReplicaSums {
  double count;
  const double* mean;
  double* sums;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    sums[i] = i == 0 ? count : (count > 0 ? count * mean[i - 1] : 0.0);
  }
};
// From the summed count and sums: mean[c] becomes the global mean, and deviations[c] =
// count * (var[c] + (local mean - global mean)^2), what the second sum adds up.
struct ReplicaDeviations {
  double count;
  const double* sums;
  const double* var;
  double* mean;
  double* deviations;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const {
    const double global_mean = sums[c + 1] / sums[0], d = mean[c] - global_mean;
    deviations[c] = count > 0 ? count * (var[c] + d * d) : 0.0;
    mean[c] = global_mean;
  }
};
// var[c] = summed deviations[c] / total count: the global biased variance.
struct GlobalVariance {
  const double* deviations;
  double total;
  double* var;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const { var[c] = deviations[c] / total; }
};

// The per-channel loops of autograd/ops/batch_norm.hpp, on the executor.

struct InvStd {
  const double* var;
  double eps;
  double* invstd;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const {
    using std::sqrt;
    invstd[c] = 1.0 / sqrt(var[c] + eps);
  }
};
// invstd[c] = 1 / sqrt(var[c] + eps).
template <class Ex>
void batch_norm_invstd(const Ex& ex, const double* var, std::int64_t channels, double eps, double* invstd) {
  ex.indexed(channels, InvStd{var, eps, invstd});
}

template <class T>
struct RunningUpdate {
  const double* mean;
  const double* var;
  double momentum, unbias;
  T* running_mean;
  T* running_var;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const {
    using A = accumulate_t<T>;
    running_mean[c] = from_accumulate<T>(
        static_cast<A>((1 - momentum) * load_double(running_mean, c) + momentum * mean[c]));
    running_var[c] = from_accumulate<T>(
        static_cast<A>((1 - momentum) * load_double(running_var, c) + momentum * var[c] * unbias));
  }
};
// running = (1 - momentum) * running + momentum * batch, the variance unbiased with the count of
// values per channel the statistics were taken over (> 1).
template <class T, class Ex>
void batch_norm_update_running(const Ex& ex, const double* mean, const double* var, std::int64_t channels,
                               double momentum, double count, T* running_mean, T* running_var) {
  check(count > 1, "batch_norm_update_running: expected more than 1 value per channel, got ", count);
  ex.indexed(channels, RunningUpdate<T>{mean, var, momentum, count / (count - 1), running_mean, running_var});
}

template <class T>
struct StatisticsFromRunning {
  const T* running_mean;
  const T* running_var;
  double eps;
  double* mean;
  double* invstd;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const {
    using std::sqrt;
    mean[c] = load_double(running_mean, c);
    invstd[c] = 1.0 / sqrt(load_double(running_var, c) + eps);
  }
};
// Evaluation's statistics: mean = running_mean, invstd = 1 / sqrt(running_var + eps).
template <class T, class Ex>
void batch_norm_running_statistics(const Ex& ex, const T* running_mean, const T* running_var, std::int64_t channels,
                                   double eps, double* mean, double* invstd) {
  ex.indexed(channels, StatisticsFromRunning<T>{running_mean, running_var, eps, mean, invstd});
}

template <class T>
struct AffineGrads {
  const double* sum_gy;
  const double* second;
  const double* invstd;
  T* gw;
  T* gb;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t c) const {
    using A = accumulate_t<T>;
    if (gw) gw[c] = from_accumulate<T>(static_cast<A>(second[c] * (invstd ? invstd[c] : 1.0)));
    if (gb) gb[c] = from_accumulate<T>(static_cast<A>(sum_gy[c]));
  }
};
// gb = sum_gy, gw = sum_gy_xhat; from batch_norm_backward_sums' sum_gy_xmu pass invstd too
// (gw = sum_gy_xmu * invstd). gw or gb may be null.
template <class T, class Ex>
void batch_norm_affine_grads(const Ex& ex, const double* sum_gy, const double* second, const double* invstd,
                             std::int64_t channels, T* gw, T* gb) {
  ex.indexed(channels, AffineGrads<T>{sum_gy, second, invstd, gw, gb});
}

}  // namespace ptrain::kernels::indexed
