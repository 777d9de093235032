#pragma once
// The windows of 2D pooling with PyTorch's arithmetic (output size, ceil_mode, padding counted or
// not in the average, adaptive windows [floor(o*H/OH), ceil((o+1)*H/OH))), shared by the CPU
// kernels (kernels/cpu/pool.hpp) and the executor algorithms (kernels/indexed/pool.hpp).
#include <algorithm>
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/core/shape.hpp"

namespace ptrain::kernels {

struct Pool2dGeometry {
  std::int64_t batch = 0, channels = 0, in_h = 0, in_w = 0;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t out_h = 0, out_w = 0;
  bool count_include_pad = true;

  std::int64_t planes() const { return batch * channels; }
  std::int64_t in_plane() const { return in_h * in_w; }
  std::int64_t out_plane() const { return out_h * out_w; }
};

namespace detail {
// torch's pooling_output_shape (dilation 1).
inline std::int64_t pooled_size(std::int64_t in, std::int64_t kernel, std::int64_t pad, std::int64_t stride,
                                bool ceil_mode) {
  const std::int64_t span = in + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0);
  std::int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  // With ceil_mode the last window must still start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// PyTorch's avg_pool2d window: clipped bounds and the divisor (window including padding but not
// past it, or only the part inside the input). Host and device (kernels/indexed/pool.hpp).
struct AvgWindow {
  std::int64_t h0, h1, w0, w1, divisor;
};
PTRAIN_HOST_DEVICE inline AvgWindow avg_window(const Pool2dGeometry& g, std::int64_t oh, std::int64_t ow) {
  std::int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  std::int64_t h1 = std::min(h0 + g.kernel_h, g.in_h + g.pad_h), w1 = std::min(w0 + g.kernel_w, g.in_w + g.pad_w);
  const std::int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<std::int64_t>(h0, 0);
  w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, g.in_h);
  w1 = std::min(w1, g.in_w);
  return {h0, h1, w0, w1, g.count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

PTRAIN_HOST_DEVICE inline std::int64_t adaptive_start(std::int64_t o, std::int64_t out, std::int64_t in) {
  return o * in / out;
}
PTRAIN_HOST_DEVICE inline std::int64_t adaptive_end(std::int64_t o, std::int64_t out, std::int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}
}  // namespace detail

// stride 0 means the kernel size (PyTorch's stride=None).
inline Pool2dGeometry make_pool2d_geometry(const Shape& x, std::int64_t kernel_h, std::int64_t kernel_w,
                                           std::int64_t stride_h, std::int64_t stride_w, std::int64_t pad_h,
                                           std::int64_t pad_w, bool ceil_mode, bool count_include_pad,
                                           const char* what) {
  check(x.rank() == 4, what, ": input must be [N, C, H, W], got ", x);
  check(kernel_h > 0 && kernel_w > 0, what, ": kernel size must be positive, got (", kernel_h, ", ", kernel_w, ")");
  if (stride_h == 0) stride_h = kernel_h;
  if (stride_w == 0) stride_w = kernel_w;
  check(stride_h > 0 && stride_w > 0, what, ": stride must be positive, got (", stride_h, ", ", stride_w, ")");
  check(pad_h >= 0 && pad_w >= 0 && 2 * pad_h <= kernel_h && 2 * pad_w <= kernel_w, what, ": padding (", pad_h, ", ",
        pad_w, ") must be between 0 and half the kernel size (", kernel_h, ", ", kernel_w, ")");
  Pool2dGeometry g;
  g.batch = x[0];
  g.channels = x[1];
  g.in_h = x[2];
  g.in_w = x[3];
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.pad_h = pad_h;
  g.pad_w = pad_w;
  g.count_include_pad = count_include_pad;
  g.out_h = detail::pooled_size(g.in_h, kernel_h, pad_h, stride_h, ceil_mode);
  g.out_w = detail::pooled_size(g.in_w, kernel_w, pad_w, stride_w, ceil_mode);
  check(g.out_h > 0 && g.out_w > 0, what, ": input ", x, " with kernel (", kernel_h, ", ", kernel_w, "), stride (",
        stride_h, ", ", stride_w, ") and padding (", pad_h, ", ", pad_w, ") gives an empty output (", g.out_h, " x ",
        g.out_w, ")");
  return g;
}

}  // namespace ptrain::kernels
