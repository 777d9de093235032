#pragma once
// The geometry of a 2D convolution (NCHW, weight [K, C/groups, kh, kw]) and of the transposed
// convolution as the adjoint of one: checked shapes and derived sizes, shared by the CPU kernels
// (kernels/cpu/conv.hpp) and the executor algorithms (kernels/indexed/conv.hpp).
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"

namespace ptrain::kernels {

struct Conv2dGeometry {
  std::int64_t batch = 0, in_channels = 0, in_h = 0, in_w = 0;
  std::int64_t out_channels = 0, kernel_h = 0, kernel_w = 0;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;
  std::int64_t out_h = 0, out_w = 0;

  std::int64_t in_plane() const { return in_h * in_w; }
  std::int64_t out_plane() const { return out_h * out_w; }
  std::int64_t kernel_area() const { return kernel_h * kernel_w; }
  // Rows of the column matrix of one group: (C / groups) * kh * kw.
  std::int64_t group_rows() const { return in_channels / groups * kernel_area(); }
  std::int64_t col_rows() const { return in_channels * kernel_area(); }
  std::int64_t weight_numel() const { return out_channels * group_rows(); }
  // Multiply-adds times two, for one forward pass.
  double flops() const {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(out_channels) * static_cast<double>(out_plane()) *
           static_cast<double>(group_rows());
  }
  bool is_pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
};

// Checks the shapes against each other and derives the output size; `what` names the caller.
inline Conv2dGeometry make_conv2d_geometry(const Shape& x, const Shape& w, std::int64_t stride_h, std::int64_t stride_w,
                                           std::int64_t pad_h, std::int64_t pad_w, std::int64_t dilation_h,
                                           std::int64_t dilation_w, std::int64_t groups, const char* what = "conv2d") {
  check(x.rank() == 4, what, ": input must be [N, C, H, W], got ", x);
  check(w.rank() == 4, what, ": weight must be [out_channels, in_channels / groups, kh, kw], got ", w);
  check(stride_h > 0 && stride_w > 0, what, ": stride must be positive, got (", stride_h, ", ", stride_w, ")");
  check(pad_h >= 0 && pad_w >= 0, what, ": padding must be non-negative, got (", pad_h, ", ", pad_w, ")");
  check(dilation_h > 0 && dilation_w > 0, what, ": dilation must be positive, got (", dilation_h, ", ", dilation_w,
        ")");
  check(groups > 0, what, ": groups must be positive, got ", groups);
  Conv2dGeometry g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.in_h = x[2];
  g.in_w = x[3];
  g.out_channels = w[0];
  g.kernel_h = w[2];
  g.kernel_w = w[3];
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.pad_h = pad_h;
  g.pad_w = pad_w;
  g.dilation_h = dilation_h;
  g.dilation_w = dilation_w;
  g.groups = groups;
  check(g.in_channels % groups == 0, what, ": input ", x, " has ", g.in_channels,
        " channels, not divisible by groups=", groups);
  check(g.out_channels % groups == 0, what, ": weight ", w, " has ", g.out_channels,
        " output channels, not divisible by groups=", groups);
  check(w[1] == g.in_channels / groups, what, ": weight ", w, " expects ", w[1] * groups, " input channels (", w[1],
        " per group x ", groups, " groups) but input ", x, " has ", g.in_channels);
  check(g.kernel_h > 0 && g.kernel_w > 0, what, ": empty kernel in weight ", w);
  const std::int64_t span_h = dilation_h * (g.kernel_h - 1) + 1, span_w = dilation_w * (g.kernel_w - 1) + 1;
  check(g.in_h + 2 * pad_h >= span_h && g.in_w + 2 * pad_w >= span_w, what, ": input ", x, " padded by (", pad_h, ", ",
        pad_w, ") is smaller than the dilated kernel (", span_h, " x ", span_w, ")");
  g.out_h = (g.in_h + 2 * pad_h - span_h) / stride_h + 1;
  g.out_w = (g.in_w + 2 * pad_w - span_w) / stride_w + 1;
  return g;
}

namespace detail {
// With stride 1, the input gradient of g as a convolution of the output gradient (by the kernel
// flipped in space, input and output channels swapped, padded by dilation * (k - 1) - pad).
inline Conv2dGeometry transposed_geometry(const Conv2dGeometry& g) {
  Conv2dGeometry t = g;
  t.in_channels = g.out_channels;
  t.out_channels = g.in_channels;
  t.in_h = g.out_h;
  t.in_w = g.out_w;
  t.out_h = g.in_h;
  t.out_w = g.in_w;
  t.pad_h = g.dilation_h * (g.kernel_h - 1) - g.pad_h;
  t.pad_w = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  return t;
}
}  // namespace detail

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
  return make_conv2d_geometry(Shape{x[0], w[1] * groups, out_h, out_w}, w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                              dilation_w, groups, what);
}

}  // namespace ptrain::kernels
