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
#include "ptrain/kernels/geometry/upsample.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

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

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::interpolate2d_forward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::interpolate2d_backward)
