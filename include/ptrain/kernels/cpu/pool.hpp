#pragma once
// 2D pooling on CPU, NCHW, with PyTorch's window arithmetic (output size, ceil_mode, padding
// counted or not in the average, adaptive windows [floor(o*H/OH), ceil((o+1)*H/OH))).
// Each (image, channel) plane is independent: the loops run in parallel over planes. half and
// bfloat16 are computed in float (widen.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/cpu/widen.hpp"
#include "ptrain/kernels/geometry/pool.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

namespace detail {
inline bool parallel_pool(std::int64_t work) { return work >= 32768; }

// One output row of a 2x2 stride-2 max pool: the general loop's scan order and test (a later
// value wins if greater or NaN) as selects, not branches, since after a ReLU the winner is a coin
// toss that a branch predictor loses. r0, r1: the window's two input rows; row: r0's offset in
// its plane, below: the plane's width.
template <class T, class Index>
void max_pool2x2_row(const T* r0, const T* r1, std::int64_t OW, Index row, Index below, T* y, Index* index) {
  for (std::int64_t ow = 0; ow < OW; ++ow) {
    T best = r0[2 * ow];
    Index at = 0;
    const T b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
    const bool take_b = (b > best) | (b != b);
    best = take_b ? b : best;
    at = take_b ? Index(1) : at;
    const bool take_c = (c > best) | (c != c);
    best = take_c ? c : best;
    at = take_c ? below : at;
    const bool take_d = (d > best) | (d != d);
    best = take_d ? d : best;
    at = take_d ? Index(below + 1) : at;
    y[ow] = best;
    index[ow] = row + static_cast<Index>(2 * ow) + at;
  }
}

#if !defined(__CUDACC__)
// The float rows eight outputs at a time in GCC vectors: the pooled rows are short (14 or 7
// outputs), too short for the compiler's own vector loop, which left them to scalar branches.
typedef float PoolFloats __attribute__((vector_size(32)));
typedef std::int32_t PoolInts __attribute__((vector_size(32)));

inline void max_pool2x2_row(const float* r0, const float* r1, std::int64_t OW, std::int32_t row,
                            std::int32_t below, float* y, std::int32_t* index) {
  const PoolInts even_columns = {0, 2, 4, 6, 8, 10, 12, 14};
  for (std::int64_t ow = 0; ow < OW; ow += 8) {
    const std::int64_t n = std::min<std::int64_t>(8, OW - ow);
    const float *upper = r0 + 2 * ow, *lower = r1 + 2 * ow;
    float upper_tail[16] = {}, lower_tail[16] = {};
    if (n < 8) {
      std::copy_n(upper, 2 * n, upper_tail);
      std::copy_n(lower, 2 * n, lower_tail);
      upper = upper_tail;
      lower = lower_tail;
    }
    PoolFloats u0, u1, l0, l1;
    std::memcpy(&u0, upper, 32);
    std::memcpy(&u1, upper + 8, 32);
    std::memcpy(&l0, lower, 32);
    std::memcpy(&l1, lower + 8, 32);
    const PoolFloats a = __builtin_shufflevector(u0, u1, 0, 2, 4, 6, 8, 10, 12, 14);
    const PoolFloats b = __builtin_shufflevector(u0, u1, 1, 3, 5, 7, 9, 11, 13, 15);
    const PoolFloats c = __builtin_shufflevector(l0, l1, 0, 2, 4, 6, 8, 10, 12, 14);
    const PoolFloats d = __builtin_shufflevector(l0, l1, 1, 3, 5, 7, 9, 11, 13, 15);
    PoolFloats best = a;
    PoolInts at = {};
    PoolInts take = (b > best) | (b != b);
    best = take ? b : best;
    at = take ? at + 1 : at;
    take = (c > best) | (c != c);
    best = take ? c : best;
    at = take ? PoolInts{} + below : at;
    take = (d > best) | (d != d);
    best = take ? d : best;
    at = take ? PoolInts{} + (below + 1) : at;
    const PoolInts where = row + 2 * static_cast<std::int32_t>(ow) + even_columns + at;
    if (n == 8) {
      std::memcpy(y + ow, &best, 32);
      std::memcpy(index + ow, &where, 32);
    } else {
      for (std::int64_t i = 0; i < n; ++i) y[ow + i] = best[i], index[ow + i] = where[i];
    }
  }
}
#endif
}  // namespace detail

// max_pool2d_forward for the common 2x2 window at stride 2 without padding, whole windows only.
template <class T, class Index>
void max_pool2x2_forward(const Pool2dGeometry& g, const T* x, T* y, Index* index) {
  const std::int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
#pragma omp parallel for if (detail::parallel_pool(g.planes() * g.out_plane() * 4)) schedule(static)
  for (std::int64_t plane = 0; plane < g.planes(); ++plane)
    for (std::int64_t oh = 0; oh < OH; ++oh) {
      const T* r0 = x + plane * H * W + 2 * oh * W;
      detail::max_pool2x2_row(r0, r0 + W, OW, static_cast<Index>(2 * oh * W), static_cast<Index>(W),
                              y + (plane * OH + oh) * OW, index + (plane * OH + oh) * OW);
    }
}

// y = max over each window (padding is -inf); index = ih * W + iw of the maximum within its
// plane (the first one on ties, the last NaN if any, as in PyTorch).
template <class T, class Index>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, Index* index) {
  const std::int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0 &&
        2 * OH <= H && 2 * OW <= W)
      return max_pool2x2_forward(g, x, y, index);
  }
#pragma omp parallel for if (detail::parallel_pool(g.planes() * g.out_plane() * g.kernel_h * g.kernel_w)) schedule(static)
  for (std::int64_t plane = 0; plane < g.planes(); ++plane) {
    const T* xp = x + plane * H * W;
    T* yp = y + plane * OH * OW;
    Index* ip = index + plane * OH * OW;
    for (std::int64_t oh = 0; oh < OH; ++oh) {
      const std::int64_t h0 = std::max<std::int64_t>(oh * g.stride_h - g.pad_h, 0);
      const std::int64_t h1 = std::min(oh * g.stride_h - g.pad_h + g.kernel_h, H);
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const std::int64_t w0 = std::max<std::int64_t>(ow * g.stride_w - g.pad_w, 0);
        const std::int64_t w1 = std::min(ow * g.stride_w - g.pad_w + g.kernel_w, W);
        T best = -std::numeric_limits<T>::infinity();
        std::int64_t at = h0 * W + w0;
        for (std::int64_t ih = h0; ih < h1; ++ih)
          for (std::int64_t iw = w0; iw < w1; ++iw) {
            const T v = xp[ih * W + iw];
            if (v > best || std::isnan(v)) {
              best = v;
              at = ih * W + iw;
            }
          }
        yp[oh * OW + ow] = best;
        ip[oh * OW + ow] = static_cast<Index>(at);
      }
    }
  }
}

// gx = 0, then gx[index] += gy.
template <class T, class Index>
void max_pool2d_backward(const Pool2dGeometry& g, const T* gy, const Index* index, T* gx) {
  const std::int64_t in = g.in_plane(), out = g.out_plane();
#pragma omp parallel for if (detail::parallel_pool(g.planes() * (in + out))) schedule(static)
  for (std::int64_t plane = 0; plane < g.planes(); ++plane) {
    T* gp = gx + plane * in;
    std::fill(gp, gp + in, T(0));
    const T* gyp = gy + plane * out;
    const Index* ip = index + plane * out;
    for (std::int64_t o = 0; o < out; ++o) gp[ip[o]] += gyp[o];
  }
}

template <class T>
void avg_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y) {
  const std::int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
#pragma omp parallel for if (detail::parallel_pool(g.planes() * g.out_plane() * g.kernel_h * g.kernel_w)) schedule(static)
  for (std::int64_t plane = 0; plane < g.planes(); ++plane) {
    const T* xp = x + plane * H * W;
    T* yp = y + plane * OH * OW;
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const auto win = detail::avg_window(g, oh, ow);
        T sum = T(0);
        for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
          for (std::int64_t iw = win.w0; iw < win.w1; ++iw) sum += xp[ih * W + iw];
        yp[oh * OW + ow] = win.h0 < win.h1 && win.w0 < win.w1 ? sum / static_cast<T>(win.divisor) : T(0);
      }
  }
}

template <class T>
void avg_pool2d_backward(const Pool2dGeometry& g, const T* gy, T* gx) {
  const std::int64_t H = g.in_h, W = g.in_w, OH = g.out_h, OW = g.out_w;
#pragma omp parallel for if (detail::parallel_pool(g.planes() * g.out_plane() * g.kernel_h * g.kernel_w)) schedule(static)
  for (std::int64_t plane = 0; plane < g.planes(); ++plane) {
    T* gp = gx + plane * H * W;
    std::fill(gp, gp + H * W, T(0));
    const T* gyp = gy + plane * OH * OW;
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const auto win = detail::avg_window(g, oh, ow);
        if (win.h0 >= win.h1 || win.w0 >= win.w1) continue;
        const T share = gyp[oh * OW + ow] / static_cast<T>(win.divisor);
        for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
          for (std::int64_t iw = win.w0; iw < win.w1; ++iw) gp[ih * W + iw] += share;
      }
  }
}

// x [planes, H, W] -> y [planes, OH, OW], each output the mean of its adaptive window.
template <class T>
void adaptive_avg_pool2d_forward(std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                 std::int64_t OW, const T* x, T* y) {
#pragma omp parallel for if (detail::parallel_pool(planes * H * W)) schedule(static)
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const T* xp = x + plane * H * W;
    T* yp = y + plane * OH * OW;
    for (std::int64_t oh = 0; oh < OH; ++oh) {
      const std::int64_t h0 = detail::adaptive_start(oh, OH, H), h1 = detail::adaptive_end(oh, OH, H);
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const std::int64_t w0 = detail::adaptive_start(ow, OW, W), w1 = detail::adaptive_end(ow, OW, W);
        T sum = T(0);
        if (w1 - w0 == W)  // full-width rows are one block (global pooling)
          sum = detail::array_of(xp + h0 * W, (h1 - h0) * W).sum();
        else
          for (std::int64_t ih = h0; ih < h1; ++ih) sum += detail::array_of(xp + ih * W + w0, w1 - w0).sum();
        yp[oh * OW + ow] = sum / static_cast<T>((h1 - h0) * (w1 - w0));
      }
    }
  }
}

template <class T>
void adaptive_avg_pool2d_backward(std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                  std::int64_t OW, const T* gy, T* gx) {
#pragma omp parallel for if (detail::parallel_pool(planes * H * W)) schedule(static)
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    T* gp = gx + plane * H * W;
    std::fill(gp, gp + H * W, T(0));
    const T* gyp = gy + plane * OH * OW;
    for (std::int64_t oh = 0; oh < OH; ++oh) {
      const std::int64_t h0 = detail::adaptive_start(oh, OH, H), h1 = detail::adaptive_end(oh, OH, H);
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const std::int64_t w0 = detail::adaptive_start(ow, OW, W), w1 = detail::adaptive_end(ow, OW, W);
        const T share = gyp[oh * OW + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
        if (w1 - w0 == W)
          detail::array_of(gp + h0 * W, (h1 - h0) * W) += share;
        else
          for (std::int64_t ih = h0; ih < h1; ++ih) detail::array_of(gp + ih * W + w0, w1 - w0) += share;
      }
    }
  }
}

// The 16-bit types: the float kernels on widened copies, the results rounded once.
template <class T, class Index>
  requires is_reduced_float_v<T>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, Index* index) {
  Tensor<float> yf = float_buffer(g.planes() * g.out_plane());
  max_pool2d_forward(g, widen(x, g.planes() * g.in_plane()).data(), yf.data(), index);
  narrow(yf, y);
}
template <class T, class Index>
  requires is_reduced_float_v<T>
void max_pool2d_backward(const Pool2dGeometry& g, const T* gy, const Index* index, T* gx) {
  Tensor<float> gxf = float_buffer(g.planes() * g.in_plane());
  max_pool2d_backward(g, widen(gy, g.planes() * g.out_plane()).data(), index, gxf.data());
  narrow(gxf, gx);
}
template <class T>
  requires is_reduced_float_v<T>
void avg_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y) {
  Tensor<float> yf = float_buffer(g.planes() * g.out_plane());
  avg_pool2d_forward(g, widen(x, g.planes() * g.in_plane()).data(), yf.data());
  narrow(yf, y);
}
template <class T>
  requires is_reduced_float_v<T>
void avg_pool2d_backward(const Pool2dGeometry& g, const T* gy, T* gx) {
  Tensor<float> gxf = float_buffer(g.planes() * g.in_plane());
  avg_pool2d_backward(g, widen(gy, g.planes() * g.out_plane()).data(), gxf.data());
  narrow(gxf, gx);
}
template <class T>
  requires is_reduced_float_v<T>
void adaptive_avg_pool2d_forward(std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                 std::int64_t OW, const T* x, T* y) {
  Tensor<float> yf = float_buffer(planes * OH * OW);
  adaptive_avg_pool2d_forward(planes, H, W, OH, OW, widen(x, planes * H * W).data(), yf.data());
  narrow(yf, y);
}
template <class T>
  requires is_reduced_float_v<T>
void adaptive_avg_pool2d_backward(std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                  std::int64_t OW, const T* gy, T* gx) {
  Tensor<float> gxf = float_buffer(planes * H * W);
  adaptive_avg_pool2d_backward(planes, H, W, OH, OW, widen(gy, planes * OH * OW).data(), gxf.data());
  narrow(gxf, gx);
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::avg_pool2d_forward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::avg_pool2d_backward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::adaptive_avg_pool2d_forward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::adaptive_avg_pool2d_backward)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::max_pool2d_forward<float, std::int32_t>)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::max_pool2d_forward<double, std::int32_t>)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::max_pool2d_backward<float, std::int32_t>)
PTRAIN_PREBUILT_KERNEL(ptrain::kernels::max_pool2d_backward<double, std::int32_t>)
