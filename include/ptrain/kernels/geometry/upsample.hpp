#pragma once
// The source coordinates of nearest and bilinear resizing, PyTorch's (interpolate): for each
// output row and column, the input taps it reads and their weights. Shared by the CPU kernels
// (kernels/cpu/upsample.hpp) and the executor algorithms (kernels/indexed/upsample.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"

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
  const float scale =
      scale_factor > 0 ? static_cast<float>(1.0 / scale_factor) : static_cast<float>(in) / static_cast<float>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t i;
    if (out == in)
      i = o;
    else if (out == 2 * in)
      i = o >> 1;
    else
      i = std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
    taps[static_cast<std::size_t>(o)] = {i, i, 1.0, 0.0};
  }
  return taps;
}

// torch's area_pixel_compute_scale and area_pixel_compute_source_index for linear modes.
inline std::vector<InterpolationTap> linear_taps(std::int64_t in, std::int64_t out, bool align_corners,
                                                 double scale_factor) {
  std::vector<InterpolationTap> taps(static_cast<std::size_t>(out));
  double scale;
  if (align_corners)
    scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  else
    scale = scale_factor > 0 ? 1.0 / scale_factor : static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    const double src =
        align_corners ? scale * static_cast<double>(o) : std::max(scale * (static_cast<double>(o) + 0.5) - 0.5, 0.0);
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

}  // namespace ptrain::kernels
