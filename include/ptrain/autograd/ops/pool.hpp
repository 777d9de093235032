#pragma once
// max_pool2d, avg_pool2d and adaptive_avg_pool2d on [N, C, H, W] on any device, as in
// torch.nn.functional (dilation 1, no divisor_override); kernels through kernels/pool.hpp.
#include <cstdint>
#include <limits>
#include <utility>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/geometry/pool.hpp"
#include "ptrain/kernels/pool.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

// A pooling window. stride 0 means the kernel size (PyTorch's stride=None); padding is at most
// half the kernel. count_include_pad applies to avg_pool2d only: padded positions count in the
// divisor (PyTorch's default).
struct Pool2dOptions {
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 0, stride_w = 0;
  std::int64_t pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;

  static Pool2dOptions square(std::int64_t kernel, std::int64_t stride = 0, std::int64_t pad = 0) {
    return {kernel, kernel, stride, stride, pad, pad};
  }
};

inline kernels::Pool2dGeometry pool2d_geometry(const Shape& x, const Pool2dOptions& o, const char* what) {
  return kernels::make_pool2d_geometry(x, o.kernel_h, o.kernel_w, o.stride_h, o.stride_w, o.pad_h, o.pad_w, o.ceil_mode,
                                       o.count_include_pad, what);
}

namespace detail {
// max_pool2d's geometry, checked for its argmax index: an int32 offset within an input plane.
inline kernels::Pool2dGeometry checked_max_pool2d_geometry(const Shape& x, const Pool2dOptions& options) {
  const kernels::Pool2dGeometry g = pool2d_geometry(x, options, "max_pool2d");
  check(g.in_plane() <= std::numeric_limits<std::int32_t>::max(), "max_pool2d: input plane of ", g.in_plane(),
        " elements exceeds 2^31 - 1");
  return g;
}

// adaptive_avg_pool2d's checks: x [N, C, H, W] with H, W > 0, a positive output size.
inline void check_adaptive_avg_pool2d(const Shape& x, std::int64_t out_h, std::int64_t out_w) {
  check(x.rank() == 4, "adaptive_avg_pool2d: input must be [N, C, H, W], got ", x);
  check(out_h > 0 && out_w > 0, "adaptive_avg_pool2d: output size must be positive, got (", out_h, ", ", out_w, ")");
  check(x[2] > 0 && x[3] > 0, "adaptive_avg_pool2d: empty input plane in ", x);
}
}  // namespace detail

template <class T, Device D>
Var<T, D> max_pool2d(const Var<T, D>& x, const Pool2dOptions& options) {
  const kernels::Pool2dGeometry g = detail::checked_max_pool2d_geometry(x.shape(), options);
  Tensor<T, D> y({g.batch, g.channels, g.out_h, g.out_w});
  // The argmax of each window, as an offset within its input plane, kept on the device.
  Tensor<std::int32_t, D> index(y.shape());
  kernels::max_pool2d_forward(kernels::executor_for<D>{}, g, x.value().data(), y.data(), index.data());
  return make_var<T, D>(std::move(y), {x}, "max_pool2d", [g, index](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::max_pool2d_backward(kernels::executor_for<D>{}, g, self.grad.data(), index.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// nn.MaxPool2d(kernel, stride, padding) with a square window; stride 0 means kernel.
template <class T, Device D>
Var<T, D> max_pool2d(const Var<T, D>& x, std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0) {
  return max_pool2d(x, Pool2dOptions::square(kernel, stride, padding));
}

template <class T, Device D>
Var<T, D> avg_pool2d(const Var<T, D>& x, const Pool2dOptions& options) {
  const kernels::Pool2dGeometry g = pool2d_geometry(x.shape(), options, "avg_pool2d");
  Tensor<T, D> y({g.batch, g.channels, g.out_h, g.out_w});
  kernels::avg_pool2d_forward(kernels::executor_for<D>{}, g, x.value().data(), y.data());
  return make_var<T, D>(std::move(y), {x}, "avg_pool2d", [g](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::avg_pool2d_backward(kernels::executor_for<D>{}, g, self.grad.data(), gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// nn.AvgPool2d(kernel, stride, padding) with a square window, count_include_pad=True.
template <class T, Device D>
Var<T, D> avg_pool2d(const Var<T, D>& x, std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0) {
  return avg_pool2d(x, Pool2dOptions::square(kernel, stride, padding));
}

// Output [N, C, out_h, out_w]; output (i, j) averages rows [floor(i*H/out_h), ceil((i+1)*H/out_h))
// and the same for columns, so windows overlap when the sizes do not divide.
template <class T, Device D>
Var<T, D> adaptive_avg_pool2d(const Var<T, D>& x, std::int64_t out_h, std::int64_t out_w) {
  detail::check_adaptive_avg_pool2d(x.shape(), out_h, out_w);
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor<T, D> y({N, C, out_h, out_w});
  kernels::adaptive_avg_pool2d_forward(kernels::executor_for<D>{}, N * C, H, W, out_h, out_w, x.value().data(),
                                       y.data());
  return make_var<T, D>(std::move(y), {x}, "adaptive_avg_pool2d", [N, C, H, W, out_h, out_w](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::adaptive_avg_pool2d_backward(kernels::executor_for<D>{}, N * C, H, W, out_h, out_w, self.grad.data(),
                                          gx.data());
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::adaptive_avg_pool2d)
