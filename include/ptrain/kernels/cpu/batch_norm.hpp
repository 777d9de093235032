#pragma once
// Per-channel loops of batch normalisation on CPU. x is viewed as [outer, C, inner]: [N, C]
// has inner = 1, [N, C, H, W] has inner = H*W. Reductions run in parallel over channels, with
// Eigen's vectorised sums inside a plane and double accumulation across planes.
#include <algorithm>
#include <cstdint>

#include <Eigen/Core>

namespace ptrain::kernels {

struct ChannelLayout {
  std::int64_t outer = 0, channels = 0, inner = 1;
  std::int64_t count() const { return outer * inner; }  // elements per channel
};

namespace detail {
template <class T>
using ConstPlane = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;
template <class T>
using Plane = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;

// The elements of channel c in row n: contiguous for 4D input, one element for 2D.
template <class T>
ConstPlane<T> plane(const T* base, const ChannelLayout& l, std::int64_t n, std::int64_t c) {
  return ConstPlane<T>(base + (n * l.channels + c) * l.inner, l.inner, Eigen::InnerStride<>(1));
}
inline bool parallel_channels(const ChannelLayout& l) { return l.outer * l.channels * l.inner >= 32768; }
}  // namespace detail

// mean[c] and biased var[c] in one pass, summing x - x[first of c] so that a large mean does not
// cancel the variance away.
template <class T>
void channel_moments(const T* x, const ChannelLayout& l, double* mean, double* var) {
  const std::int64_t m = l.count();
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c) {
    if (m == 0) {
      mean[c] = var[c] = 0;
      continue;
    }
    const T shift = x[c * l.inner];
    double s1 = 0, s2 = 0;
    if (l.inner == 1) {
      for (std::int64_t n = 0; n < l.outer; ++n) {
        const double d = static_cast<double>(x[n * l.channels + c] - shift);
        s1 += d;
        s2 += d * d;
      }
    } else {
      for (std::int64_t n = 0; n < l.outer; ++n) {
        const auto d = detail::plane(x, l, n, c) - shift;
        s1 += static_cast<double>(d.sum());
        s2 += static_cast<double>(d.square().sum());
      }
    }
    const double md = s1 / static_cast<double>(m);
    mean[c] = static_cast<double>(shift) + md;
    var[c] = std::max(0.0, s2 / static_cast<double>(m) - md * md);
  }
}

// y = x * scale[c] + shift[c]
template <class T>
void channel_affine(const T* x, const ChannelLayout& l, const T* scale, const T* shift, T* y) {
  if (l.inner == 1) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
    for (std::int64_t n = 0; n < l.outer; ++n)
      for (std::int64_t c = 0; c < l.channels; ++c)
        y[n * l.channels + c] = x[n * l.channels + c] * scale[c] + shift[c];
    return;
  }
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t p = 0; p < l.outer * l.channels; ++p) {
    const std::int64_t c = p % l.channels;
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(y + p * l.inner, l.inner) =
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x + p * l.inner, l.inner) * scale[c] + shift[c];
  }
}

// gx = a[c] * gy + b[c] * x + d[c]
template <class T>
void channel_affine2(const T* gy, const T* x, const ChannelLayout& l, const T* a, const T* b, const T* d, T* gx) {
  using Map = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  if (l.inner == 1) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
    for (std::int64_t n = 0; n < l.outer; ++n)
      for (std::int64_t c = 0; c < l.channels; ++c) {
        const std::int64_t i = n * l.channels + c;
        gx[i] = a[c] * gy[i] + b[c] * x[i] + d[c];
      }
    return;
  }
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t p = 0; p < l.outer * l.channels; ++p) {
    const std::int64_t c = p % l.channels;
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(gx + p * l.inner, l.inner) =
        Map(gy + p * l.inner, l.inner) * a[c] + Map(x + p * l.inner, l.inner) * b[c] + d[c];
  }
}

// sum_gy[c] = sum of gy, sum_gy_xc[c] = sum of gy * (x - center[c]), over channel c.
template <class T>
void channel_grad_sums(const T* gy, const T* x, const ChannelLayout& l, const double* center, double* sum_gy,
                       double* sum_gy_xc) {
#pragma omp parallel for if (detail::parallel_channels(l)) schedule(static)
  for (std::int64_t c = 0; c < l.channels; ++c) {
    const T mu = static_cast<T>(center[c]);
    double s1 = 0, s2 = 0;
    if (l.inner == 1) {
      for (std::int64_t n = 0; n < l.outer; ++n) {
        const std::int64_t i = n * l.channels + c;
        s1 += static_cast<double>(gy[i]);
        s2 += static_cast<double>(gy[i]) * static_cast<double>(x[i] - mu);
      }
    } else {
      for (std::int64_t n = 0; n < l.outer; ++n) {
        const auto g = detail::plane(gy, l, n, c);
        s1 += static_cast<double>(g.sum());
        s2 += static_cast<double>((g * (detail::plane(x, l, n, c) - mu)).sum());
      }
    }
    sum_gy[c] = s1;
    sum_gy_xc[c] = s2;
  }
}

}  // namespace ptrain::kernels
