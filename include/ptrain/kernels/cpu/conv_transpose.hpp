#pragma once
// Transposed convolution on CPU (torch.nn.functional.conv_transpose2d) as the adjoint of a
// convolution, run on conv.hpp's kernels: its forward is that convolution's input gradient, its
// backward that convolution's forward and weight gradient.
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/kernels/cpu/conv.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

// y[N, out, OH, OW] = conv_transpose(x[N, in, H, W], w) + b[out] (b may be null).
template <class T>
void conv_transpose2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y) {
  conv2d_grad_input<T>(g, w, x, y);
  if (!b) return;
  const std::int64_t C = g.in_channels, P = g.in_plane();
#pragma omp parallel for if (g.batch * C * P >= 32768) schedule(static)
  for (std::int64_t plane = 0; plane < g.batch * C; ++plane) {
    T* row = y + plane * P;
    const T bc = b[plane % C];
    for (std::int64_t p = 0; p < P; ++p) row[p] += bc;
  }
}

// Given gy = dL/dy, writes (not adds) gx, gw and gb; any of them may be null to skip it.
template <class T>
void conv_transpose2d_backward(const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx, T* gw, T* gb) {
  if (gx) conv2d_forward<T>(g, gy, w, nullptr, gx);
  if (gw) conv2d_grad_weight<T>(g, gy, x, gw);
  // gy is laid out as the transposed geometry's output: its bias gradient is the per-channel sum.
  if (gb) conv2d_grad_bias<T>(detail::transposed_geometry(g), gy, gb);
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::conv_transpose2d_forward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::conv_transpose2d_backward)
