#pragma once
// Nearest and bilinear resizing written once for HostExecutor and CudaExecutor, on the taps of
// kernels/geometry/upsample.hpp's Interpolation2d (copied to the executor's device). Forward is a
// thread per output pixel, backward a thread per input pixel gathering from the outputs that read it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/kernels/geometry/upsample.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::kernels::indexed {

// An Interpolation2d's taps on a device: one per output row then one per output column, and for
// each input row then input column the outputs [first, last) that read it.
template <class Device>
struct InterpolationTaps {
  Tensor<InterpolationTap, Device> taps;
  Tensor<std::int64_t, Device> readers;
};

namespace detail {
// readers[2i], readers[2i + 1]: the first and one past the last output whose tap reads input i
// (taps are monotone in the output, so these outputs are contiguous).
inline void append_readers(const std::vector<InterpolationTap>& taps, std::int64_t in, std::vector<std::int64_t>& out) {
  const std::size_t base = out.size();
  out.resize(base + 2 * static_cast<std::size_t>(in), 0);
  std::vector<bool> seen(static_cast<std::size_t>(in), false);
  for (std::int64_t o = 0; o < static_cast<std::int64_t>(taps.size()); ++o)
    for (const std::int64_t i : {taps[static_cast<std::size_t>(o)].i0, taps[static_cast<std::size_t>(o)].i1}) {
      const auto at = base + 2 * static_cast<std::size_t>(i);
      if (!seen[static_cast<std::size_t>(i)]) out[at] = o;
      seen[static_cast<std::size_t>(i)] = true;
      out[at + 1] = std::max(out[at + 1], o + 1);
    }
}
}  // namespace detail

template <class Ex>
InterpolationTaps<typename Ex::device> interpolation_taps(const Ex&, const Interpolation2d& g) {
  using Device = typename Ex::device;
  std::vector<InterpolationTap> taps(g.rows);
  taps.insert(taps.end(), g.cols.begin(), g.cols.end());
  std::vector<std::int64_t> readers;
  detail::append_readers(g.rows, g.in_h, readers);
  detail::append_readers(g.cols, g.in_w, readers);
  return {Tensor<InterpolationTap, Device>::from(Shape{static_cast<std::int64_t>(taps.size())}, taps),
          Tensor<std::int64_t, Device>::from(Shape{static_cast<std::int64_t>(readers.size())}, readers)};
}

// The arithmetic of kernels::interpolate2d_forward: weights and sums in double, rounded once.
template <class T>
struct InterpolateForward {
  const InterpolationTap* rows;
  const InterpolationTap* cols;
  const T* x;
  T* y;
  std::int64_t H, W, OH, OW;
  bool bilinear;

  PTRAIN_HOST_DEVICE static double at(const T* row, std::int64_t i) {
    return static_cast<double>(to_accumulate(row[i]));
  }
  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    const std::int64_t ow = e % OW, t = e / OW;
    const std::int64_t oh = t % OH, p = t / OH;
    const InterpolationTap r = rows[oh], c = cols[ow];
    const T* a = x + (p * H + r.i0) * W;
    if (!bilinear) {
      y[e] = a[c.i0];
      return;
    }
    const T* b = x + (p * H + r.i1) * W;
    const double v = r.w0 * (c.w0 * at(a, c.i0) + c.w1 * at(a, c.i1)) + r.w1 * (c.w0 * at(b, c.i0) + c.w1 * at(b, c.i1));
    y[e] = from_accumulate<T>(static_cast<accumulate_t<T>>(v));
  }
};

// The adjoint as a gather: the terms kernels::interpolate2d_backward adds onto an input pixel, in
// its order (outputs row by row; per output its (i0, i1) rows and columns in turn).
template <class T>
struct InterpolateBackward {
  const InterpolationTap* rows;
  const InterpolationTap* cols;
  const std::int64_t* row_readers;
  const std::int64_t* col_readers;
  const T* gy;
  T* gx;
  std::int64_t H, W, OH, OW;
  bool bilinear;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    using A = accumulate_t<T>;
    const std::int64_t iw = e % W, t = e / W;
    const std::int64_t ih = t % H, p = t / H;
    A sum(0);
    for (std::int64_t oh = row_readers[2 * ih]; oh < row_readers[2 * ih + 1]; ++oh) {
      const InterpolationTap r = rows[oh];
      const T* in = gy + (p * OH + oh) * OW;
      for (std::int64_t ow = col_readers[2 * iw]; ow < col_readers[2 * iw + 1]; ++ow) {
        const InterpolationTap c = cols[ow];
        if (!bilinear) {
          if (r.i0 == ih && c.i0 == iw) sum += to_accumulate(in[ow]);
          continue;
        }
        const double g = static_cast<double>(to_accumulate(in[ow]));
        const double top = r.w0 * g, bottom = r.w1 * g;
        if (r.i0 == ih) {
          if (c.i0 == iw) sum += static_cast<A>(c.w0 * top);
          if (c.i1 == iw) sum += static_cast<A>(c.w1 * top);
        }
        if (r.i1 == ih) {
          if (c.i0 == iw) sum += static_cast<A>(c.w0 * bottom);
          if (c.i1 == iw) sum += static_cast<A>(c.w1 * bottom);
        }
      }
    }
    gx[e] = from_accumulate<T>(sum);
  }
};

// Mirrors kernels::interpolate2d_forward; taps from interpolation_taps(ex, g), kept by a caller
// that runs forward and backward on the same geometry.
template <class T, class Ex>
void interpolate2d_forward(const Ex& ex, const Interpolation2d& g, const InterpolationTaps<typename Ex::device>& taps,
                           const T* x, T* y) {
  const std::int64_t OH = g.out_h(), OW = g.out_w();
  check(taps.taps.numel() == OH + OW && taps.readers.numel() == 2 * (g.in_h + g.in_w),
        "interpolate2d_forward: taps of another geometry (", taps.taps.numel(), " taps for ", OH, " x ", OW, ")");
  const InterpolationTap* rows = taps.taps.data();
  ex.indexed(g.planes * OH * OW, InterpolateForward<T>{rows, rows + OH, x, y, g.in_h, g.in_w, OH, OW, g.bilinear});
}
template <class T, class Ex>
void interpolate2d_forward(const Ex& ex, const Interpolation2d& g, const T* x, T* y) {
  interpolate2d_forward<T>(ex, g, interpolation_taps(ex, g), x, y);
}

// Mirrors kernels::interpolate2d_backward: writes gx.
template <class T, class Ex>
void interpolate2d_backward(const Ex& ex, const Interpolation2d& g, const InterpolationTaps<typename Ex::device>& taps,
                            const T* gy, T* gx) {
  const std::int64_t OH = g.out_h(), OW = g.out_w();
  check(taps.taps.numel() == OH + OW && taps.readers.numel() == 2 * (g.in_h + g.in_w),
        "interpolate2d_backward: taps of another geometry (", taps.taps.numel(), " taps for ", OH, " x ", OW, ")");
  const InterpolationTap* rows = taps.taps.data();
  const std::int64_t* readers = taps.readers.data();
  ex.indexed(g.planes * g.in_h * g.in_w, InterpolateBackward<T>{rows, rows + OH, readers, readers + 2 * g.in_h, gy, gx,
                                                                g.in_h, g.in_w, OH, OW, g.bilinear});
}
template <class T, class Ex>
void interpolate2d_backward(const Ex& ex, const Interpolation2d& g, const T* gy, T* gx) {
  interpolate2d_backward<T>(ex, g, interpolation_taps(ex, g), gy, gx);
}

}  // namespace ptrain::kernels::indexed
