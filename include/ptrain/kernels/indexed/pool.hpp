#pragma once
// max, average and adaptive average 2D pooling written once for HostExecutor and CudaExecutor,
// on kernels/geometry/pool.hpp's Pool2dGeometry and window arithmetic. Forward is a thread per output;
// backward a thread per input pixel gathering from the windows that hold it (no atomics, and the
// CPU kernels' order of addition).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/geometry/pool.hpp"
#include "ptrain/kernels/indexed.hpp"

namespace ptrain::kernels::indexed {

// The outputs o in [first, last] whose window [o*stride - pad, o*stride - pad + kernel) holds i.
struct WindowRange {
  std::int64_t first, last;
};
PTRAIN_HOST_DEVICE inline WindowRange windows_holding(std::int64_t i, std::int64_t kernel, std::int64_t stride,
                                                      std::int64_t pad, std::int64_t out) {
  const std::int64_t low = i + pad - kernel + 1;  // o * stride >= low
  const std::int64_t first = low <= 0 ? 0 : (low + stride - 1) / stride;
  const std::int64_t last = (i + pad) / stride;
  return {first, last < out - 1 ? last : out - 1};
}
// The adaptive windows [floor(o*in/out), ceil((o+1)*in/out)) that hold i.
PTRAIN_HOST_DEVICE inline WindowRange adaptive_windows_holding(std::int64_t i, std::int64_t in, std::int64_t out) {
  return {i * out / in, ((i + 1) * out - 1) / in};
}

template <class T, class Index>
struct MaxPoolForward {
  Pool2dGeometry g;
  const T* x;
  T* y;
  Index* index;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    using A = accumulate_t<T>;
    const std::int64_t H = g.in_h, W = g.in_w;
    const std::int64_t ow = e % g.out_w, t = e / g.out_w;
    const std::int64_t oh = t % g.out_h, plane = t / g.out_h;
    const std::int64_t top = oh * g.stride_h - g.pad_h, left = ow * g.stride_w - g.pad_w;
    const std::int64_t h0 = top > 0 ? top : 0, h1 = top + g.kernel_h < H ? top + g.kernel_h : H;
    const std::int64_t w0 = left > 0 ? left : 0, w1 = left + g.kernel_w < W ? left + g.kernel_w : W;
    const T* xp = x + plane * H * W;
    A best = -std::numeric_limits<A>::infinity();
    std::int64_t at = h0 * W + w0;
    for (std::int64_t ih = h0; ih < h1; ++ih)
      for (std::int64_t iw = w0; iw < w1; ++iw) {
        const A v = to_accumulate(xp[ih * W + iw]);
        if (v > best || v != v) {  // the last NaN wins, as in kernels::max_pool2d_forward
          best = v;
          at = ih * W + iw;
        }
      }
    y[e] = from_accumulate<T>(best);
    index[e] = static_cast<Index>(at);
  }
};

// gx[p] = the sum of gy over the windows whose maximum was p.
template <class T, class Index>
struct MaxPoolBackward {
  Pool2dGeometry g;
  const T* gy;
  const Index* index;
  T* gx;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    const std::int64_t iw = e % g.in_w, t = e / g.in_w;
    const std::int64_t ih = t % g.in_h, plane = t / g.in_h;
    const std::int64_t here = ih * g.in_w + iw, offset = plane * g.out_h * g.out_w;
    const WindowRange rows = windows_holding(ih, g.kernel_h, g.stride_h, g.pad_h, g.out_h);
    const WindowRange cols = windows_holding(iw, g.kernel_w, g.stride_w, g.pad_w, g.out_w);
    accumulate_t<T> sum(0);
    for (std::int64_t oh = rows.first; oh <= rows.last; ++oh)
      for (std::int64_t ow = cols.first; ow <= cols.last; ++ow) {
        const std::int64_t o = offset + oh * g.out_w + ow;
        if (static_cast<std::int64_t>(index[o]) == here) sum += to_accumulate(gy[o]);
      }
    gx[e] = from_accumulate<T>(sum);
  }
};

template <class T>
struct AvgPoolForward {
  Pool2dGeometry g;
  const T* x;
  T* y;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    using A = accumulate_t<T>;
    const std::int64_t ow = e % g.out_w, t = e / g.out_w;
    const std::int64_t oh = t % g.out_h, plane = t / g.out_h;
    const kernels::detail::AvgWindow win = kernels::detail::avg_window(g, oh, ow);
    const T* xp = x + plane * g.in_h * g.in_w;
    A sum(0);
    for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
      for (std::int64_t iw = win.w0; iw < win.w1; ++iw) sum += to_accumulate(xp[ih * g.in_w + iw]);
    y[e] = from_accumulate<T>(win.h0 < win.h1 && win.w0 < win.w1 ? sum / static_cast<A>(win.divisor) : A(0));
  }
};

template <class T>
struct AvgPoolBackward {
  Pool2dGeometry g;
  const T* gy;
  T* gx;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    using A = accumulate_t<T>;
    const std::int64_t iw = e % g.in_w, t = e / g.in_w;
    const std::int64_t ih = t % g.in_h, plane = t / g.in_h;
    const T* gyp = gy + plane * g.out_h * g.out_w;
    const WindowRange rows = windows_holding(ih, g.kernel_h, g.stride_h, g.pad_h, g.out_h);
    const WindowRange cols = windows_holding(iw, g.kernel_w, g.stride_w, g.pad_w, g.out_w);
    A sum(0);
    for (std::int64_t oh = rows.first; oh <= rows.last; ++oh)
      for (std::int64_t ow = cols.first; ow <= cols.last; ++ow)
        sum += to_accumulate(gyp[oh * g.out_w + ow]) / static_cast<A>(kernels::detail::avg_window(g, oh, ow).divisor);
    gx[e] = from_accumulate<T>(sum);
  }
};

// [planes, H, W] <-> [planes, OH, OW] with adaptive windows.
struct AdaptiveGeometry {
  std::int64_t planes, H, W, OH, OW;
};

template <class T>
struct AdaptiveAvgPoolForward {
  AdaptiveGeometry g;
  const T* x;
  T* y;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    using A = accumulate_t<T>;
    const std::int64_t ow = e % g.OW, t = e / g.OW;
    const std::int64_t oh = t % g.OH, plane = t / g.OH;
    const std::int64_t h0 = kernels::detail::adaptive_start(oh, g.OH, g.H), h1 = kernels::detail::adaptive_end(oh, g.OH, g.H);
    const std::int64_t w0 = kernels::detail::adaptive_start(ow, g.OW, g.W), w1 = kernels::detail::adaptive_end(ow, g.OW, g.W);
    const T* xp = x + plane * g.H * g.W;
    A sum(0);
    for (std::int64_t ih = h0; ih < h1; ++ih)
      for (std::int64_t iw = w0; iw < w1; ++iw) sum += to_accumulate(xp[ih * g.W + iw]);
    y[e] = from_accumulate<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
  }
};

template <class T>
struct AdaptiveAvgPoolBackward {
  AdaptiveGeometry g;
  const T* gy;
  T* gx;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    using A = accumulate_t<T>;
    const std::int64_t iw = e % g.W, t = e / g.W;
    const std::int64_t ih = t % g.H, plane = t / g.H;
    const T* gyp = gy + plane * g.OH * g.OW;
    const WindowRange rows = adaptive_windows_holding(ih, g.H, g.OH), cols = adaptive_windows_holding(iw, g.W, g.OW);
    A sum(0);
    for (std::int64_t oh = rows.first; oh <= rows.last; ++oh) {
      const std::int64_t h = kernels::detail::adaptive_end(oh, g.OH, g.H) - kernels::detail::adaptive_start(oh, g.OH, g.H);
      for (std::int64_t ow = cols.first; ow <= cols.last; ++ow) {
        const std::int64_t w = kernels::detail::adaptive_end(ow, g.OW, g.W) - kernels::detail::adaptive_start(ow, g.OW, g.W);
        sum += to_accumulate(gyp[oh * g.OW + ow]) / static_cast<A>(h * w);
      }
    }
    gx[e] = from_accumulate<T>(sum);
  }
};

// Mirrors kernels::max_pool2d_forward: y and the argmax index (ih * W + iw within its plane).
template <class T, class Index, class Ex>
void max_pool2d_forward(const Ex& ex, const Pool2dGeometry& g, const T* x, T* y, Index* index) {
  check(g.in_plane() - 1 <= static_cast<std::int64_t>(std::numeric_limits<Index>::max()),
        "max_pool2d_forward: input plane of ", g.in_plane(), " elements overflows the index type");
  ex.indexed(g.planes() * g.out_plane(), MaxPoolForward<T, Index>{g, x, y, index});
}
// Mirrors kernels::max_pool2d_backward: writes gx.
template <class T, class Index, class Ex>
void max_pool2d_backward(const Ex& ex, const Pool2dGeometry& g, const T* gy, const Index* index, T* gx) {
  ex.indexed(g.planes() * g.in_plane(), MaxPoolBackward<T, Index>{g, gy, index, gx});
}
// Mirror kernels::avg_pool2d_forward and avg_pool2d_backward (count_include_pad as in g).
template <class T, class Ex>
void avg_pool2d_forward(const Ex& ex, const Pool2dGeometry& g, const T* x, T* y) {
  ex.indexed(g.planes() * g.out_plane(), AvgPoolForward<T>{g, x, y});
}
template <class T, class Ex>
void avg_pool2d_backward(const Ex& ex, const Pool2dGeometry& g, const T* gy, T* gx) {
  ex.indexed(g.planes() * g.in_plane(), AvgPoolBackward<T>{g, gy, gx});
}
// Mirror kernels::adaptive_avg_pool2d_forward and adaptive_avg_pool2d_backward.
template <class T, class Ex>
void adaptive_avg_pool2d_forward(const Ex& ex, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                 std::int64_t OW, const T* x, T* y) {
  check(H > 0 && W > 0 && OH > 0 && OW > 0, "adaptive_avg_pool2d_forward: sizes must be positive, got ", H, " x ", W,
        " to ", OH, " x ", OW);
  ex.indexed(planes * OH * OW, AdaptiveAvgPoolForward<T>{{planes, H, W, OH, OW}, x, y});
}
template <class T, class Ex>
void adaptive_avg_pool2d_backward(const Ex& ex, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                  std::int64_t OW, const T* gy, T* gx) {
  check(H > 0 && W > 0 && OH > 0 && OW > 0, "adaptive_avg_pool2d_backward: sizes must be positive, got ", H, " x ",
        W, " to ", OH, " x ", OW);
  ex.indexed(planes * H * W, AdaptiveAvgPoolBackward<T>{{planes, H, W, OH, OW}, gy, gx});
}

}  // namespace ptrain::kernels::indexed
