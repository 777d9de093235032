#pragma once
// upsample on [N, C, H, W] on any device, as torch.nn.functional.interpolate in modes 'nearest' and
// 'bilinear' (align_corners false or true), to an output size or by a scale factor; kernels
// through kernels/upsample.hpp.
#include <cmath>
#include <cstdint>
#include <utility>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/geometry/upsample.hpp"
#include "ptrain/kernels/upsample.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

enum class UpsampleMode { nearest, bilinear };

// Either an output size (out_h, out_w) or a scale factor (scale_h, scale_w), not both. A scale
// gives the output floor(input * scale), and, as in PyTorch, the pixel centres are mapped with
// 1 / scale rather than with the ratio of the sizes. align_corners is for bilinear only.
struct UpsampleOptions {
  UpsampleMode mode = UpsampleMode::nearest;
  std::int64_t out_h = 0, out_w = 0;
  double scale_h = 0, scale_w = 0;
  bool align_corners = false;

  // nn.Upsample(scale_factor=factor, mode=..., align_corners=...).
  static UpsampleOptions by_scale(double factor, UpsampleMode mode = UpsampleMode::nearest,
                                  bool align_corners = false) {
    return {mode, 0, 0, factor, factor, align_corners};
  }
  // nn.Upsample(size=(out_h, out_w), mode=..., align_corners=...).
  static UpsampleOptions to_size(std::int64_t out_h, std::int64_t out_w, UpsampleMode mode = UpsampleMode::nearest,
                                 bool align_corners = false) {
    return {mode, out_h, out_w, 0, 0, align_corners};
  }
};

// The options are coherent: one of size and scale, positive, align_corners only where it means
// something (PyTorch rejects it for nearest too).
inline void check_upsample_options(const UpsampleOptions& o) {
  const bool by_size = o.out_h != 0 || o.out_w != 0, by_scale = o.scale_h != 0 || o.scale_w != 0;
  check(by_size != by_scale, "upsample: give either an output size or a scale factor, got size (", o.out_h, ", ",
        o.out_w, ") and scale (", o.scale_h, ", ", o.scale_w, ")");
  if (by_size)
    check(o.out_h > 0 && o.out_w > 0, "upsample: output size (", o.out_h, ", ", o.out_w, ") must be positive");
  if (by_scale)
    check(o.scale_h > 0 && o.scale_w > 0 && std::isfinite(o.scale_h) && std::isfinite(o.scale_w),
          "upsample: scale factor (", o.scale_h, ", ", o.scale_w, ") must be positive and finite");
  check(!o.align_corners || o.mode == UpsampleMode::bilinear,
        "upsample: align_corners applies to bilinear mode only (PyTorch rejects it for nearest)");
}

namespace detail {
// upsample's checks and geometry on any device: x [N, C, H, W] resized as the options say.
inline kernels::Interpolation2d checked_upsample_geometry(const Shape& x, const UpsampleOptions& options) {
  check_upsample_options(options);
  check(x.rank() == 4, "upsample: input must be [N, C, H, W], got ", x);
  const auto scaled = [](std::int64_t extent, double scale) {
    return static_cast<std::int64_t>(std::floor(static_cast<double>(extent) * scale));
  };
  const bool by_scale = options.scale_h > 0;
  const std::int64_t out_h = by_scale ? scaled(x[2], options.scale_h) : options.out_h;
  const std::int64_t out_w = by_scale ? scaled(x[3], options.scale_w) : options.out_w;
  return kernels::make_interpolation2d(x, options.mode == UpsampleMode::bilinear, options.align_corners, out_h, out_w,
                                       options.scale_h, options.scale_w);
}
}  // namespace detail

template <class T, Device D>
Var<T, D> upsample(const Var<T, D>& x, const UpsampleOptions& options) {
  const kernels::Interpolation2d g = detail::checked_upsample_geometry(x.shape(), options);
  Tensor<T, D> y({x.size(0), x.size(1), g.out_h(), g.out_w()});
  kernels::interpolate2d_forward(kernels::executor_for<D>{}, g, x.value().data(), y.data());
  return make_var<T, D>(std::move(y), {x}, "upsample", [g](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::interpolate2d_backward(kernels::executor_for<D>{}, g, self.grad.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::upsample)
