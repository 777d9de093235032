#pragma once
// Nearest and bilinear resizing on CPU, NCHW, with PyTorch's source coordinates
// (torch.nn.functional.interpolate): each output pixel reads one input pixel (nearest) or a 2x2
// block with separable weights (bilinear). Planes are independent and run in parallel.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"

namespace ptrain::kernels {

// Output index o along one axis reads in[i0] * w0 + in[i1] * w1 (nearest: in[i0] alone).
struct InterpolationTap {
  std::int64_t i0 = 0, i1 = 0;
  double w0 = 1, w1 = 0;
};

// torch's nearest_idx: the same float arithmetic, so that the same pixel is picked.
// scale_factor > 0 is the one the caller asked for (the map then uses 1 / scale_factor).
inline std::vector<InterpolationTap> nearest_taps(std::int64_t in, std::int64_t out, double scale_factor) {
  std::vector<InterpolationTap> taps(static_cast<std::size_t>(out));
  const float scale = scale_factor > 0 ? static_cast<float>(1.0 / scale_factor)
                                       : static_cast<float>(in) / static_cast<float>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t i;
    if (out == in) i = o;
    else if (out == 2 * in) i = o >> 1;
    else i = std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
    taps[static_cast<std::size_t>(o)] = {i, i, 1.0, 0.0};
  }
  return taps;
}

// torch's area_pixel_compute_scale and area_pixel_compute_source_index for linear modes.
inline std::vector<InterpolationTap> linear_taps(std::int64_t in, std::int64_t out, bool align_corners,
                                                 double scale_factor) {
  std::vector<InterpolationTap> taps(static_cast<std::size_t>(out));
  double scale;
  if (align_corners) scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  else scale = scale_factor > 0 ? 1.0 / scale_factor : static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    const double src = align_corners ? scale * static_cast<double>(o)
                                     : std::max(scale * (static_cast<double>(o) + 0.5) - 0.5, 0.0);
    const std::int64_t i0 = std::min(static_cast<std::int64_t>(src), in - 1);
    const double lambda = std::min(src - static_cast<double>(i0), 1.0);
    taps[static_cast<std::size_t>(o)] = {i0, i0 + (i0 < in - 1 ? 1 : 0), 1.0 - lambda, lambda};
  }
  return taps;
}

struct Interpolation2d {
  std::int64_t planes = 0, in_h = 0, in_w = 0;
  bool bilinear = false;
  std::vector<InterpolationTap> rows, cols;  // one per output row, one per output column

  std::int64_t out_h() const { return static_cast<std::int64_t>(rows.size()); }
  std::int64_t out_w() const { return static_cast<std::int64_t>(cols.size()); }
};

// x [N, C, H, W] resized to out_h x out_w; scale_h/scale_w > 0 are the factors the caller asked
// for (PyTorch maps coordinates with them rather than with the size ratio).
inline Interpolation2d make_interpolation2d(const Shape& x, bool bilinear, bool align_corners, std::int64_t out_h,
                                            std::int64_t out_w, double scale_h, double scale_w) {
  check(x.rank() == 4 && x[2] > 0 && x[3] > 0, "upsample: input must be [N, C, H, W] with H, W > 0, got ", x);
  check(out_h > 0 && out_w > 0, "upsample: output size must be positive, got ", out_h, " x ", out_w);
  Interpolation2d g;
  g.planes = x[0] * x[1];
  g.in_h = x[2];
  g.in_w = x[3];
  g.bilinear = bilinear;
  g.rows = bilinear ? linear_taps(g.in_h, out_h, align_corners, scale_h) : nearest_taps(g.in_h, out_h, scale_h);
  g.cols = bilinear ? linear_taps(g.in_w, out_w, align_corners, scale_w) : nearest_taps(g.in_w, out_w, scale_w);
  return g;
}

template <class T>
void interpolate2d_forward(const Interpolation2d& g, const T* x, T* y) {
  const std::int64_t H = g.in_h, W = g.in_w, OH = g.out_h(), OW = g.out_w();
#pragma omp parallel for if (g.planes * OH * OW >= parallel_threshold) schedule(static)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const T* plane = x + p * H * W;
    for (std::int64_t oh = 0; oh < OH; ++oh) {
      const InterpolationTap& r = g.rows[static_cast<std::size_t>(oh)];
      const T* a = plane + r.i0 * W;
      const T* b = plane + r.i1 * W;
      T* out = y + (p * OH + oh) * OW;
      if (!g.bilinear) {
        for (std::int64_t ow = 0; ow < OW; ++ow) out[ow] = a[g.cols[static_cast<std::size_t>(ow)].i0];
        continue;
      }
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const InterpolationTap& c = g.cols[static_cast<std::size_t>(ow)];
        out[ow] = static_cast<T>(r.w0 * (c.w0 * a[c.i0] + c.w1 * a[c.i1]) + r.w1 * (c.w0 * b[c.i0] + c.w1 * b[c.i1]));
      }
    }
  }
}

// The adjoint, written into gx: each output gradient goes back onto the input pixels it read,
// with their weights.
template <class T>
void interpolate2d_backward(const Interpolation2d& g, const T* gy, T* gx) {
  const std::int64_t H = g.in_h, W = g.in_w, OH = g.out_h(), OW = g.out_w();
#pragma omp parallel for if (g.planes * OH * OW >= parallel_threshold) schedule(static)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    T* plane = gx + p * H * W;
    std::fill(plane, plane + H * W, T(0));
    for (std::int64_t oh = 0; oh < OH; ++oh) {
      const InterpolationTap& r = g.rows[static_cast<std::size_t>(oh)];
      T* a = plane + r.i0 * W;
      T* b = plane + r.i1 * W;
      const T* in = gy + (p * OH + oh) * OW;
      if (!g.bilinear) {
        for (std::int64_t ow = 0; ow < OW; ++ow) a[g.cols[static_cast<std::size_t>(ow)].i0] += in[ow];
        continue;
      }
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const InterpolationTap& c = g.cols[static_cast<std::size_t>(ow)];
        const double top = r.w0 * static_cast<double>(in[ow]), bottom = r.w1 * static_cast<double>(in[ow]);
        a[c.i0] += static_cast<T>(c.w0 * top);
        a[c.i1] += static_cast<T>(c.w1 * top);
        b[c.i0] += static_cast<T>(c.w0 * bottom);
        b[c.i1] += static_cast<T>(c.w1 * bottom);
      }
    }
  }
}

}  // namespace ptrain::kernels
