#pragma once
// Transposed convolution on CPU (torch.nn.functional.conv_transpose2d) as the adjoint of a
// convolution, run on conv.hpp's kernels: its forward is that convolution's input gradient, its
// backward that convolution's forward and weight gradient.
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/kernels/cpu/conv.hpp"

namespace ptrain::kernels {

// The convolution this transposes: from the transposed output [N, out, OH, OW] back to the
// transposed input x [N, in, H, W], with the transposed weight [in, out/groups, kh, kw] as its
// own weight [K, C/groups, kh, kw]. So g.in_* describe the output and g.out_* the input.
inline Conv2dGeometry make_conv_transpose2d_geometry(const Shape& x, const Shape& w, std::int64_t stride_h,
                                                     std::int64_t stride_w, std::int64_t pad_h, std::int64_t pad_w,
                                                     std::int64_t output_pad_h, std::int64_t output_pad_w,
                                                     std::int64_t dilation_h, std::int64_t dilation_w,
                                                     std::int64_t groups) {
  constexpr const char* what = "conv_transpose2d";
  check(x.rank() == 4 && x[2] > 0 && x[3] > 0, what, ": input must be [N, C, H, W] with H, W > 0, got ", x);
  check(w.rank() == 4, what, ": weight must be [in_channels, out_channels / groups, kh, kw], got ", w);
  check(groups > 0, what, ": groups must be positive, got ", groups);
  check(w[0] == x[1], what, ": weight ", w, " expects ", w[0], " input channels but input ", x, " has ", x[1]);
  check(x[1] % groups == 0, what, ": input ", x, " has ", x[1], " channels, not divisible by groups=", groups);
  check(stride_h > 0 && stride_w > 0 && dilation_h > 0 && dilation_w > 0, what,
        ": stride and dilation must be positive, got (", stride_h, ", ", stride_w, ") and (", dilation_h, ", ",
        dilation_w, ")");
  // Smaller than the stride, so that the convolution of the output has exactly the input's size
  // (PyTorch also accepts an output_padding below the dilation alone; that case is not supported).
  check(output_pad_h >= 0 && output_pad_w >= 0 && output_pad_h < stride_h && output_pad_w < stride_w, what,
        ": output_padding (", output_pad_h, ", ", output_pad_w, ") must be non-negative and smaller than the stride (",
        stride_h, ", ", stride_w, ")");
  const std::int64_t out_h = (x[2] - 1) * stride_h - 2 * pad_h + dilation_h * (w[2] - 1) + output_pad_h + 1;
  const std::int64_t out_w = (x[3] - 1) * stride_w - 2 * pad_w + dilation_w * (w[3] - 1) + output_pad_w + 1;
  check(out_h > 0 && out_w > 0, what, ": input ", x, ", weight ", w, " and padding (", pad_h, ", ", pad_w,
        ") give an empty output (", out_h, " x ", out_w, ")");
  return make_conv2d_geometry(Shape{x[0], w[1] * groups, out_h, out_w}, w, stride_h, stride_w, pad_h, pad_w,
                              dilation_h, dilation_w, groups, what);
}

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
