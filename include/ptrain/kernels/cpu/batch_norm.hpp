#pragma once
// Batch normalisation on CPU. x is viewed as [outer, C, inner]: [N, C] has inner = 1,
// [N, C, H, W] has inner = H*W. Each channel is one task (parallel over channels): its statistics
// and its normalisation run back to back, so the channel's N planes are read from memory once
// and found in cache the second time. Sums inside a plane are Eigen's vectorised reductions,
// accumulated in double across planes. half and bfloat16 are computed in float, as Apex keeps
// batch norm in fp32: half on float copies (widen.hpp), bfloat16 widened in registers (below). The
// forward optionally adds a residual and applies relu in the
// same pass (relu(bn(x) + residual)), and batch_norm_relu_backward masks the gradient by the relu
// output there, so the fused layer's intermediates never reach memory.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/lanes.hpp"
#include "ptrain/kernels/cpu/widen.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

namespace detail {
// An Eigen array view of n elements at p, `stride` apart (1: contiguous, vectorised).
template <class S>
auto run_view(S* p, std::int64_t n) {
  using Array = Eigen::Array<std::remove_const_t<S>, Eigen::Dynamic, 1>;
  return Eigen::Map<std::conditional_t<std::is_const_v<S>, const Array, Array>>(p, n);
}
template <class S>
auto run_view(S* p, std::int64_t n, std::int64_t stride) {
  using Array = Eigen::Array<std::remove_const_t<S>, Eigen::Dynamic, 1>;
  using Map = Eigen::Map<std::conditional_t<std::is_const_v<S>, const Array, Array>, 0, Eigen::InnerStride<>>;
  return Map(p, n, Eigen::InnerStride<>(stride));
}

inline bool parallel_channels(const ChannelLayout& l) { return l.outer * l.channels * l.inner >= 32768; }

// Calls f(view) for each run of channel c, where view(p) is the run of tensor p: one contiguous
// plane per row n for 4D input, one strided column for 2D input.
template <class F>
void for_each_run(const ChannelLayout& l, std::int64_t c, F&& f) {
  if (l.inner == 1) {
    f([&](auto* p) { return run_view(p + c, l.outer, l.channels); });
    return;
  }
  for (std::int64_t n = 0; n < l.outer; ++n) {
    const std::int64_t at = (n * l.channels + c) * l.inner;
    f([&](auto* p) { return run_view(p + at, l.inner); });
  }
}

// mean and biased variance of channel c, summing x - x[first of c] so that a large mean does not
// cancel the variance away.
template <class T>
void channel_moments(const T* x, const ChannelLayout& l, std::int64_t c, double& mean, double& var) {
  const T shift = x[c * l.inner];
  double s1 = 0, s2 = 0;
  for_each_run(l, c, [&](auto view) {
    const auto d = view(x) - shift;
    s1 += static_cast<double>(d.sum());
    s2 += static_cast<double>(d.square().sum());
  });
  const double m = static_cast<double>(l.count());
  const double centred = s1 / m;
  mean = static_cast<double>(shift) + centred;
  const double v = s2 / m - centred * centred;
  var = v < 0.0 ? 0.0 : v;  // rounding can go below 0; NaN stays (std::max(0.0, NaN) is 0)
}

// y = x * scale + shift over channel c, plus residual where not null, then relu when asked
// (NaN passes, as kernels::Relu), on the run while it is in cache.
template <class T>
void channel_affine(const T* x, const ChannelLayout& l, std::int64_t c, T scale, T shift, const T* residual,
                    bool relu, T* y) {
  for_each_run(l, c, [&](auto view) {
    auto out = view(y);
    if (residual)
      out = view(x) * scale + shift + view(residual);
    else
      out = view(x) * scale + shift;
    if (relu)
      for (Eigen::Index j = 0; j < out.size(); ++j) out[j] = out[j] <= T(0) ? T(0) : out[j];
  });
}

// g = gy where relu's output y passed (y not <= 0, NaN included), else 0, over channel c.
template <class T>
void channel_relu_mask(const T* y, const T* gy, const ChannelLayout& l, std::int64_t c, T* g) {
  for_each_run(l, c, [&](auto view) {
    const auto yv = view(y), gv = view(gy);
    auto out = view(g);
    for (Eigen::Index j = 0; j < out.size(); ++j) out[j] = yv[j] <= T(0) ? T(0) : gv[j];
  });
}
}  // namespace detail

// Training forward: per channel, the batch mean and biased variance (written to mean, var), then
// y = (x - mean) / sqrt(var + eps) * weight + bias. weight and bias may be null (1 and 0). Fused:
// residual (x's shape) is added when not null, and relu applied when asked.
template <class T>
  requires std::floating_point<T>  // float and double (the 16-bit types: below, weight maybe float)
void batch_norm_forward_training(const T* x, const ChannelLayout& l, const T* weight, const T* bias, double eps,
                                 T* y, double* mean, double* var, const T* residual = nullptr, bool relu = false) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c) {
    detail::channel_moments(x, l, c, mean[c], var[c]);
    const double a = (weight ? static_cast<double>(weight[c]) : 1.0) / std::sqrt(var[c] + eps);
    const double b = (bias ? static_cast<double>(bias[c]) : 0.0) - mean[c] * a;
    detail::channel_affine(x, l, c, static_cast<T>(a), static_cast<T>(b), residual, relu, y);
  }
}

// Evaluation forward: y = (x - mean) * invstd * weight + bias with given statistics; residual and
// relu as batch_norm_forward_training.
template <class T>
  requires std::floating_point<T>
void batch_norm_forward_inference(const T* x, const ChannelLayout& l, const T* weight, const T* bias,
                                  const double* mean, const double* invstd, T* y, const T* residual = nullptr,
                                  bool relu = false) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c) {
    const double a = (weight ? static_cast<double>(weight[c]) : 1.0) * invstd[c];
    const double b = (bias ? static_cast<double>(bias[c]) : 0.0) - mean[c] * a;
    detail::channel_affine(x, l, c, static_cast<T>(a), static_cast<T>(b), residual, relu, y);
  }
}

namespace detail {
// s1 = sum(gy), s2 = sum(gy * (x - mean)) over channel c.
template <class T>
void channel_backward_sums(const T* x, const T* gy, const ChannelLayout& l, std::int64_t c, double mean, double& s1,
                           double& s2) {
  const T mu = static_cast<T>(mean);
  s1 = 0;
  s2 = 0;
  for_each_run(l, c, [&](auto view) {
    const auto g = view(gy);
    s1 += static_cast<double>(g.sum());
    s2 += static_cast<double>((g * (view(x) - mu)).sum());
  });
}

// gx = w * invstd * (gy - [s1 / m + xhat * invstd * s2 / m]) over channel c, the bracket only in
// training (where the statistics depend on x); s1 and s2 as channel_backward_sums, m the count
// they were summed over.
template <class T>
void channel_backward_input(const T* x, const T* gy, const ChannelLayout& l, std::int64_t c, double weight,
                            double mean, double invstd, bool training, double s1, double s2, double m, T* gx) {
  // gx = on_gy * gy + on_x * x + constant
  const double on_gy = weight * invstd;
  const double on_x = training ? -on_gy * invstd * invstd * s2 / m : 0.0;
  const double constant = training ? -on_gy * s1 / m - on_x * mean : 0.0;
  const T a = static_cast<T>(on_gy), b = static_cast<T>(on_x), d = static_cast<T>(constant);
  for_each_run(l, c, [&](auto view) { view(gx) = view(gy) * a + view(x) * b + d; });
}

// batch_norm_backward over channel c (gx may be gy itself: each element is read before written).
template <class T>
void channel_backward(const T* x, const T* gy, const ChannelLayout& l, std::int64_t c, const T* weight,
                      const double* mean, const double* invstd, bool training, T* gx, double* sum_gy,
                      double* sum_gy_xhat) {
  double s1, s2;
  channel_backward_sums(x, gy, l, c, mean[c], s1, s2);
  sum_gy[c] = s1;
  sum_gy_xhat[c] = s2 * invstd[c];
  if (gx)
    channel_backward_input(x, gy, l, c, weight ? static_cast<double>(weight[c]) : 1.0, mean[c], invstd[c], training,
                           s1, s2, static_cast<double>(l.count()), gx);
}
}  // namespace detail

// Backward given the statistics the forward normalised with. Writes sum_gy[c] = sum(gy) and
// sum_gy_xhat[c] = sum(gy * (x - mean) * invstd) (the bias and weight gradients), and, when gx is
// not null, gx = w * invstd * (gy - [mean(gy) + xhat * mean(gy * xhat)]), the bracket only in
// training (where the statistics depend on x).
template <class T>
  requires std::floating_point<T>
void batch_norm_backward(const T* x, const T* gy, const ChannelLayout& l, const T* weight, const double* mean,
                         const double* invstd, bool training, T* gx, double* sum_gy, double* sum_gy_xhat) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c)
    detail::channel_backward(x, gy, l, c, weight, mean, invstd, training, gx, sum_gy, sum_gy_xhat);
}

// Backward of relu(bn(x) [+ residual]) given its output y: per channel, gy masked by relu (written
// to grad_residual when not null: the residual's gradient), then batch_norm_backward on the masked
// gradient while the channel is in cache. gx or grad_residual may be null.
template <class T>
  requires std::floating_point<T>
void batch_norm_relu_backward(const T* x, const T* y, const T* gy, const ChannelLayout& l, const T* weight,
                              const double* mean, const double* invstd, bool training, T* gx, T* grad_residual,
                              double* sum_gy, double* sum_gy_xhat) {
  // The masked gradient goes where it is wanted, else into gx (overwritten in place), else a buffer.
  Tensor<T> scratch = grad_residual || gx ? Tensor<T>() : Tensor<T>(Shape{l.numel()});
  T* masked = grad_residual ? grad_residual : gx ? gx : scratch.data();
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c) {
    detail::channel_relu_mask(y, gy, l, c, masked);
    detail::channel_backward(x, static_cast<const T*>(masked), l, c, weight, mean, invstd, training, gx, sum_gy,
                             sum_gy_xhat);
  }
}

// The halves of the fused training forward and backward, apart, for sums over replicas in between
// (SyncBatchNorm). Apart, each pass reads a channel twice from memory where the fused form finds
// it in cache the second time.

// Per channel, the mean and biased variance of x.
template <class T>
void batch_norm_moments(const T* x, const ChannelLayout& l, double* mean, double* var) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c) detail::channel_moments(x, l, c, mean[c], var[c]);
}

// Per channel, sum_gy[c] = sum(gy) and sum_gy_xmu[c] = sum(gy * (x - mean)).
template <class T>
void batch_norm_backward_sums(const T* x, const T* gy, const ChannelLayout& l, const double* mean, double* sum_gy,
                              double* sum_gy_xmu) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c)
    detail::channel_backward_sums(x, gy, l, c, mean[c], sum_gy[c], sum_gy_xmu[c]);
}

// Training gx from sums taken over `count` elements per channel (possibly more than x holds):
// gx = w * invstd * (gy - sum_gy / count - (x - mean) * invstd^2 * sum_gy_xmu / count).
template <class T>
  requires std::floating_point<T>
void batch_norm_backward_input(const T* x, const T* gy, const ChannelLayout& l, const T* weight, const double* mean,
                               const double* invstd, const double* sum_gy, const double* sum_gy_xmu, double count,
                               T* gx) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c)
    detail::channel_backward_input(x, gy, l, c, weight ? static_cast<double>(weight[c]) : 1.0, mean[c], invstd[c],
                                   true, sum_gy[c], sum_gy_xmu[c], count, gx);
}

// The 16-bit types: the float kernels on float copies, the results rounded once. Weight and bias are
// of x's type or float (W: a 16-bit model's BatchNorm2d keeps them in float). On [N, C, H, W]
// each channel's planes are widened into buffers of the thread's and its outputs rounded back while
// they are in cache, instead of whole copies going to memory and back ([N, C], whose channels are
// strided columns, keeps the whole copies).
namespace detail {
// A thread's float copies of one channel of [N, C, H, W] tensors, one buffer per operand, each on a
// 64-byte boundary: Eigen's sums over a plane start their vectors at its first aligned element, so
// where the copies sit decides how they round (a plane of a multiple of 16 floats rounds as in a
// whole widened copy; any other, the same way in every run).
template <class T>
class ChannelCopies {
 public:
  ChannelCopies(const ChannelLayout& l, int buffers)
      : l_(l), pitch_((l.count() + 15) / 16 * 16),
        data_(static_cast<float*>(::operator new[](static_cast<std::size_t>(buffers * pitch_) * sizeof(float),
                                                   std::align_val_t(64)))) {}
  // The layout of one channel's copy: its N planes back to back.
  ChannelLayout layout() const { return {l_.outer, 1, l_.inner}; }
  float* buffer(int i) { return data_.get() + i * pitch_; }
  // Channel c of p widened into buffer i (null for a null p).
  const float* load(int i, const T* p, std::int64_t c) {
    if (!p) return nullptr;
    for (std::int64_t n = 0; n < l_.outer; ++n)
      convert(std::span<const T>(p + (n * l_.channels + c) * l_.inner, static_cast<std::size_t>(l_.inner)),
              std::span<float>(buffer(i) + n * l_.inner, static_cast<std::size_t>(l_.inner)));
    return buffer(i);
  }
  // Buffer i rounded into channel c of p (nothing for a null p).
  void store(int i, std::int64_t c, T* p) {
    if (!p) return;
    for (std::int64_t n = 0; n < l_.outer; ++n)
      convert(std::span<const float>(buffer(i) + n * l_.inner, static_cast<std::size_t>(l_.inner)),
              std::span<T>(p + (n * l_.channels + c) * l_.inner, static_cast<std::size_t>(l_.inner)));
  }

 private:
  struct AlignedDelete {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  ChannelLayout l_;
  std::int64_t pitch_;
  std::unique_ptr<float[], AlignedDelete> data_;
};

// Calls step(copies, c) for every channel, each thread with its own `buffers` channel copies.
template <class T, class Step>
void for_each_channel_copied(const ChannelLayout& l, int buffers, Step&& step) {
#pragma omp parallel if (parallel_channels(l))
  {
    ChannelCopies<T> copies(l, buffers);
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < l.channels; ++c) step(copies, c);
  }
}
}  // namespace detail

#if !defined(__CUDACC__)
// bfloat16 on [N, C, H, W] without float copies: each pass widens planes in registers (a shift)
// and rounds its outputs there. The arithmetic is the float kernels': float products, each plane's
// sums in float lanes (two accumulators of lanes<float>) added up in double, the same formulas;
// only the order of a plane's sums differs from Eigen's.
//
// A task is a block of consecutive channels, taken row by row: row n's planes of the block are one
// run of the tensor (about 1,024 elements), read in one stream, where a channel alone would be
// read in short planes (64 elements at 8x8) channels * inner elements apart, which the hardware
// prefetchers do not follow. Each channel's sums still add its planes in row order, so the bits do
// not depend on the blocks. The block (64 x 1,024 elements at batch 64) is in L2 for the second pass.
namespace detail::bf16 {
using lanes::lane_sum;
using lanes::store_rounded;
using lanes::widened;
using F = lanes::Lanes<float>;
inline constexpr std::int64_t L = lanes::lanes<float>;

inline F relu(const F& v) { return v <= 0.0f ? F{} : v; }  // NaN passes, as kernels::Relu
inline float relu(float v) { return v <= 0.0f ? 0.0f : v; }
// gy where relu's output y passed (y not <= 0, NaN included), else 0.
inline F relu_masked(const F& y, const F& gy) { return y <= 0.0f ? F{} : gy; }
inline float relu_masked(float y, float gy) { return y <= 0.0f ? 0.0f : gy; }

// s1 += sum(d), s2 += sum(d * e) over a plane of `inner` elements, d and e given per lane and per
// element by at(j) (a pair of vectors) and at_one(j) (a pair of floats).
template <class Pair, class One>
void add_plane_sums(std::int64_t inner, Pair&& at, One&& at_one, double& s1, double& s2) {
  F a1{}, a2{}, b1{}, b2{};
  std::int64_t j = 0;
  for (; j + 2 * L <= inner; j += 2 * L) {
    const auto [d, e] = at(j);
    a1 += d;
    a2 += d * e;
    const auto [d2, e2] = at(j + L);
    b1 += d2;
    b2 += d2 * e2;
  }
  if (j + L <= inner) {
    const auto [d, e] = at(j);
    a1 += d;
    a2 += d * e;
    j += L;
  }
  double t1 = lane_sum(a1 + b1), t2 = lane_sum(a2 + b2);
  for (; j < inner; ++j) {
    const auto [d, e] = at_one(j);
    t1 += static_cast<double>(d);
    t2 += static_cast<double>(d * e);
  }
  s1 += t1;
  s2 += t2;
}

// out[j] = value(j) rounded, over a plane: value given per lane and per element.
template <class Lane, class One>
void write_plane(std::int64_t inner, bfloat16* out, Lane&& value, One&& value_one) {
  std::int64_t j = 0;
  for (; j + L <= inner; j += L) store_rounded(value(j), out + j);
  for (; j < inner; ++j) out[j] = static_cast<bfloat16>(value_one(j));
}

inline float at(const bfloat16* p, std::int64_t j) { return static_cast<float>(p[j]); }

// Channels [first, first + count) of a [outer, channels, inner] tensor: plane (n, i), channel
// first + i of row n.
template <class P>
struct BlockPlanes {
  P* start;  // channel first of row 0; null: an operand not given
  std::int64_t pitch, inner;

  BlockPlanes(P* p, const ChannelLayout& l, std::int64_t first)
      : start(p ? p + first * l.inner : nullptr), pitch(l.channels * l.inner), inner(l.inner) {}
  P* plane(std::int64_t n, std::int64_t i) const { return start ? start + n * pitch + i * inner : nullptr; }
};

inline std::int64_t channels_per_block(const ChannelLayout& l) {
  return std::clamp<std::int64_t>(1024 / l.inner, 1, std::max<std::int64_t>(1, l.channels / 8));
}

// Calls step(first, count, coefficients) for every block of channels, coefficients a thread's
// room for three floats a channel of the block.
template <class Step>
void for_each_block(const ChannelLayout& l, Step&& step) {
  const std::int64_t per = channels_per_block(l), blocks = (l.channels + per - 1) / per;
#pragma omp parallel if (parallel_channels(l))
  {
    std::vector<float> coefficients(static_cast<std::size_t>(3 * per));
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b)
      step(b * per, std::min(per, l.channels - b * per), std::span<float>(coefficients));
  }
}

// y = x * scale[i] + shift[i], plus residual where given, then relu when asked, over the block's
// planes.
inline void block_affine(const BlockPlanes<const bfloat16>& x, const BlockPlanes<const bfloat16>& residual,
                         std::int64_t outer, std::int64_t count, const float* scale, const float* shift,
                         bool relu_after, const BlockPlanes<bfloat16>& y) {
  for (std::int64_t n = 0; n < outer; ++n)
    for (std::int64_t i = 0; i < count; ++i) {
      const bfloat16 *xp = x.plane(n, i), *rp = residual.plane(n, i);
      const float a = scale[i], b = shift[i];
      write_plane(
          x.inner, y.plane(n, i),
          [&](std::int64_t j) {
            F v = widened(xp + j) * a + b;
            if (rp) v += widened(rp + j);
            return relu_after ? relu(v) : v;
          },
          [&](std::int64_t j) {
            float v = at(xp, j) * a + b;
            if (rp) v += at(rp, j);
            return relu_after ? relu(v) : v;
          });
    }
}

// The training forward over channels [first, first + count): per channel the mean and biased
// variance (summing x - x[first of c], as channel_moments), then block_affine.
inline void forward_block(const bfloat16* x, const ChannelLayout& l, std::int64_t first, std::int64_t count,
                          const float* weight, const float* bias, double eps, const bfloat16* residual,
                          bool relu_after, std::span<float> coefficients, bfloat16* y, double* mean, double* var) {
  const BlockPlanes<const bfloat16> xs(x, l, first);
  float *scale = coefficients.data(), *shift = scale + count;
  double* s1 = mean + first;  // the sums, in place of the statistics until they are known
  double* s2 = var + first;
  std::fill(s1, s1 + count, 0.0);
  std::fill(s2, s2 + count, 0.0);
  for (std::int64_t i = 0; i < count; ++i) shift[i] = at(xs.plane(0, i), 0);
  for (std::int64_t n = 0; n < l.outer; ++n)
    for (std::int64_t i = 0; i < count; ++i) {
      const bfloat16* xp = xs.plane(n, i);
      const float origin = shift[i];
      add_plane_sums(
          l.inner,
          [&](std::int64_t j) {
            const F d = widened(xp + j) - origin;
            return std::pair{d, d};
          },
          [&](std::int64_t j) {
            const float d = at(xp, j) - origin;
            return std::pair{d, d};
          },
          s1[i], s2[i]);
    }
  const double m = static_cast<double>(l.count());
  for (std::int64_t i = 0; i < count; ++i) {
    const double centred = s1[i] / m, v = s2[i] / m - centred * centred;
    s1[i] = static_cast<double>(shift[i]) + centred;
    s2[i] = v < 0.0 ? 0.0 : v;
    const double a = (weight ? static_cast<double>(weight[first + i]) : 1.0) / std::sqrt(s2[i] + eps);
    scale[i] = static_cast<float>(a);
    shift[i] = static_cast<float>((bias ? static_cast<double>(bias[first + i]) : 0.0) - s1[i] * a);
  }
  block_affine(xs, BlockPlanes<const bfloat16>(residual, l, first), l.outer, count, scale, shift, relu_after,
               BlockPlanes<bfloat16>(y, l, first));
}

// channel_backward over channels [first, first + count); with y (relu's output), gy masked by relu
// first, and written to grad_residual where given. gx may be gy itself.
inline void backward_block(const bfloat16* x, const bfloat16* y, const bfloat16* gy, const ChannelLayout& l,
                           std::int64_t first, std::int64_t count, const float* weight, const double* mean,
                           const double* invstd, bool training, std::span<float> coefficients, bfloat16* gx,
                           bfloat16* grad_residual, double* sum_gy, double* sum_gy_xhat) {
  const BlockPlanes<const bfloat16> xs(x, l, first), ys(y, l, first), gys(gy, l, first);
  const BlockPlanes<bfloat16> residual_grad(grad_residual, l, first);
  const auto g_lanes = [&](std::int64_t n, std::int64_t i, std::int64_t j) {
    const F g = widened(gys.plane(n, i) + j);
    return y ? relu_masked(widened(ys.plane(n, i) + j), g) : g;
  };
  const auto g_one = [&](std::int64_t n, std::int64_t i, std::int64_t j) {
    const float g = at(gys.plane(n, i), j);
    return y ? relu_masked(at(ys.plane(n, i), j), g) : g;
  };
  double* s1 = sum_gy + first;
  double* s2 = sum_gy_xhat + first;  // sum(gy * (x - mean)) until scaled by invstd below
  std::fill(s1, s1 + count, 0.0);
  std::fill(s2, s2 + count, 0.0);
  for (std::int64_t n = 0; n < l.outer; ++n)
    for (std::int64_t i = 0; i < count; ++i) {
      if (grad_residual)  // exact: gy or 0
        write_plane(l.inner, residual_grad.plane(n, i), [&](std::int64_t j) { return g_lanes(n, i, j); },
                    [&](std::int64_t j) { return g_one(n, i, j); });
      const bfloat16* xp = xs.plane(n, i);
      const float mu = static_cast<float>(mean[first + i]);
      add_plane_sums(
          l.inner, [&](std::int64_t j) { return std::pair{g_lanes(n, i, j), widened(xp + j) - mu}; },
          [&](std::int64_t j) { return std::pair{g_one(n, i, j), at(xp, j) - mu}; }, s1[i], s2[i]);
    }
  float *on_gy = coefficients.data(), *on_x = on_gy + count, *constant = on_x + count;
  const double m = static_cast<double>(l.count());
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t c = first + i;
    const double sum_gy_xmu = s2[i];
    s2[i] = sum_gy_xmu * invstd[c];
    const double a = (weight ? static_cast<double>(weight[c]) : 1.0) * invstd[c];
    const double b = training ? -a * invstd[c] * invstd[c] * sum_gy_xmu / m : 0.0;
    on_gy[i] = static_cast<float>(a);
    on_x[i] = static_cast<float>(b);
    constant[i] = static_cast<float>(training ? -a * s1[i] / m - b * mean[c] : 0.0);
  }
  if (!gx) return;
  const BlockPlanes<bfloat16> gxs(gx, l, first);
  for (std::int64_t n = 0; n < l.outer; ++n)
    for (std::int64_t i = 0; i < count; ++i) {
      const bfloat16* xp = xs.plane(n, i);
      const float a = on_gy[i], b = on_x[i], d = constant[i];
      write_plane(
          l.inner, gxs.plane(n, i), [&](std::int64_t j) { return g_lanes(n, i, j) * a + widened(xp + j) * b + d; },
          [&](std::int64_t j) { return g_one(n, i, j) * a + at(xp, j) * b + d; });
    }
}
}  // namespace detail::bf16
#endif

template <class T, class W = T>
  requires is_reduced_float_v<T>
void batch_norm_forward_training(const T* x, const ChannelLayout& l, const W* weight, const W* bias, double eps,
                                 T* y, double* mean, double* var, const T* residual = nullptr, bool relu = false) {
  const Tensor<float> wf = widen(weight, l.channels), bf = widen(bias, l.channels);
  if (l.inner == 1) {
    Tensor<float> yf = float_buffer(l.numel());
    batch_norm_forward_training(widen(x, l.numel()).data(), l, data_or_null(wf), data_or_null(bf), eps, yf.data(),
                                mean, var, data_or_null(widen(residual, l.numel())), relu);
    narrow(yf, y);
    return;
  }
#if !defined(__CUDACC__)
  if constexpr (std::is_same_v<T, bfloat16>) {
    detail::bf16::for_each_block(l, [&](std::int64_t first, std::int64_t count, std::span<float> coefficients) {
      detail::bf16::forward_block(x, l, first, count, data_or_null(wf), data_or_null(bf), eps, residual, relu,
                                  coefficients, y, mean, var);
    });
    return;
  }
#endif
  detail::for_each_channel_copied<T>(l, 3, [&](detail::ChannelCopies<T>& copies, std::int64_t c) {
    const float* xc = copies.load(0, x, c);
    detail::channel_moments(xc, copies.layout(), 0, mean[c], var[c]);
    const double a = (weight ? static_cast<double>(wf.data()[c]) : 1.0) / std::sqrt(var[c] + eps);
    const double b = (bias ? static_cast<double>(bf.data()[c]) : 0.0) - mean[c] * a;
    detail::channel_affine(xc, copies.layout(), 0, static_cast<float>(a), static_cast<float>(b),
                           copies.load(1, residual, c), relu, copies.buffer(2));
    copies.store(2, c, y);
  });
}
template <class T, class W = T>
  requires is_reduced_float_v<T>
void batch_norm_forward_inference(const T* x, const ChannelLayout& l, const W* weight, const W* bias,
                                  const double* mean, const double* invstd, T* y, const T* residual = nullptr,
                                  bool relu = false) {
  const Tensor<float> wf = widen(weight, l.channels), bf = widen(bias, l.channels);
  if (l.inner == 1) {
    Tensor<float> yf = float_buffer(l.numel());
    batch_norm_forward_inference(widen(x, l.numel()).data(), l, data_or_null(wf), data_or_null(bf), mean, invstd,
                                 yf.data(), data_or_null(widen(residual, l.numel())), relu);
    narrow(yf, y);
    return;
  }
#if !defined(__CUDACC__)
  if constexpr (std::is_same_v<T, bfloat16>) {
    using detail::bf16::BlockPlanes;
    detail::bf16::for_each_block(l, [&](std::int64_t first, std::int64_t count, std::span<float> coefficients) {
      float *scale = coefficients.data(), *shift = scale + count;
      for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t c = first + i;
        const double a = (weight ? static_cast<double>(wf.data()[c]) : 1.0) * invstd[c];
        scale[i] = static_cast<float>(a);
        shift[i] = static_cast<float>((bias ? static_cast<double>(bf.data()[c]) : 0.0) - mean[c] * a);
      }
      detail::bf16::block_affine(BlockPlanes<const bfloat16>(x, l, first), BlockPlanes<const bfloat16>(residual, l, first),
                                 l.outer, count, scale, shift, relu, BlockPlanes<bfloat16>(y, l, first));
    });
    return;
  }
#endif
  detail::for_each_channel_copied<T>(l, 3, [&](detail::ChannelCopies<T>& copies, std::int64_t c) {
    const double a = (weight ? static_cast<double>(wf.data()[c]) : 1.0) * invstd[c];
    const double b = (bias ? static_cast<double>(bf.data()[c]) : 0.0) - mean[c] * a;
    detail::channel_affine(copies.load(0, x, c), copies.layout(), 0, static_cast<float>(a), static_cast<float>(b),
                           copies.load(1, residual, c), relu, copies.buffer(2));
    copies.store(2, c, y);
  });
}
template <class T, class W = T>
  requires is_reduced_float_v<T>
void batch_norm_backward(const T* x, const T* gy, const ChannelLayout& l, const W* weight, const double* mean,
                         const double* invstd, bool training, T* gx, double* sum_gy, double* sum_gy_xhat) {
  const Tensor<float> wf = widen(weight, l.channels);
  if (l.inner == 1) {
    Tensor<float> gxf = gx ? float_buffer(l.numel()) : Tensor<float>();
    batch_norm_backward(widen(x, l.numel()).data(), widen(gy, l.numel()).data(), l, data_or_null(wf), mean, invstd,
                        training, data_or_null(gxf), sum_gy, sum_gy_xhat);
    narrow(gxf, gx);
    return;
  }
#if !defined(__CUDACC__)
  if constexpr (std::is_same_v<T, bfloat16>) {
    detail::bf16::for_each_block(l, [&](std::int64_t first, std::int64_t count, std::span<float> coefficients) {
      detail::bf16::backward_block(x, nullptr, gy, l, first, count, data_or_null(wf), mean, invstd, training,
                                   coefficients, gx, nullptr, sum_gy, sum_gy_xhat);
    });
    return;
  }
#endif
  // The channel's step on its copies: channel 0 of a one-channel layout, the statistics at c.
  detail::for_each_channel_copied<T>(l, 2, [&](detail::ChannelCopies<T>& copies, std::int64_t c) {
    const float* w = weight ? wf.data() + c : nullptr;
    detail::channel_backward(copies.load(0, x, c), copies.load(1, gy, c), copies.layout(), 0, w, mean + c,
                             invstd + c, training, gx ? copies.buffer(1) : nullptr, sum_gy + c, sum_gy_xhat + c);
    copies.store(1, c, gx);
  });
}
template <class T, class W = T>
  requires is_reduced_float_v<T>
void batch_norm_relu_backward(const T* x, const T* y, const T* gy, const ChannelLayout& l, const W* weight,
                              const double* mean, const double* invstd, bool training, T* gx, T* grad_residual,
                              double* sum_gy, double* sum_gy_xhat) {
  const Tensor<float> wf = widen(weight, l.channels);
  if (l.inner == 1) {
    Tensor<float> gxf = gx ? float_buffer(l.numel()) : Tensor<float>();
    Tensor<float> grf = grad_residual ? float_buffer(l.numel()) : Tensor<float>();
    batch_norm_relu_backward(widen(x, l.numel()).data(), widen(y, l.numel()).data(), widen(gy, l.numel()).data(), l,
                             data_or_null(wf), mean, invstd, training, data_or_null(gxf), data_or_null(grf), sum_gy,
                             sum_gy_xhat);
    narrow(gxf, gx);
    narrow(grf, grad_residual);
    return;
  }
#if !defined(__CUDACC__)
  if constexpr (std::is_same_v<T, bfloat16>) {
    detail::bf16::for_each_block(l, [&](std::int64_t first, std::int64_t count, std::span<float> coefficients) {
      detail::bf16::backward_block(x, y, gy, l, first, count, data_or_null(wf), mean, invstd, training, coefficients,
                                   gx, grad_residual, sum_gy, sum_gy_xhat);
    });
    return;
  }
#endif
  // Buffers: 0 x, 1 y then gx, 2 gy then the masked gradient (grad_residual's).
  detail::for_each_channel_copied<T>(l, 3, [&](detail::ChannelCopies<T>& copies, std::int64_t c) {
    const ChannelLayout one = copies.layout();
    float* masked = copies.buffer(2);
    detail::channel_relu_mask(copies.load(1, y, c), copies.load(2, gy, c), one, 0, masked);
    copies.store(2, c, grad_residual);
    const float* w = weight ? wf.data() + c : nullptr;
    detail::channel_backward(copies.load(0, x, c), static_cast<const float*>(masked), one, 0, w, mean + c,
                             invstd + c, training, gx ? copies.buffer(1) : nullptr, sum_gy + c, sum_gy_xhat + c);
    copies.store(1, c, gx);
  });
}
template <class T>
  requires is_reduced_float_v<T>
void batch_norm_moments(const T* x, const ChannelLayout& l, double* mean, double* var) {
  batch_norm_moments(widen(x, l.numel()).data(), l, mean, var);
}
template <class T>
  requires is_reduced_float_v<T>
void batch_norm_backward_sums(const T* x, const T* gy, const ChannelLayout& l, const double* mean, double* sum_gy,
                              double* sum_gy_xmu) {
  batch_norm_backward_sums(widen(x, l.numel()).data(), widen(gy, l.numel()).data(), l, mean, sum_gy, sum_gy_xmu);
}
template <class T, class W = T>
  requires is_reduced_float_v<T>
void batch_norm_backward_input(const T* x, const T* gy, const ChannelLayout& l, const W* weight, const double* mean,
                               const double* invstd, const double* sum_gy, const double* sum_gy_xmu, double count,
                               T* gx) {
  Tensor<float> gxf = float_buffer(l.numel());
  batch_norm_backward_input(widen(x, l.numel()).data(), widen(gy, l.numel()).data(), l,
                            data_or_null(widen(weight, l.channels)), mean, invstd, sum_gy, sum_gy_xmu, count,
                            gxf.data());
  narrow(gxf, gx);
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::batch_norm_forward_training)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::batch_norm_forward_inference)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::batch_norm_backward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::batch_norm_relu_backward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::batch_norm_moments)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::batch_norm_backward_sums)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::batch_norm_backward_input)
