#pragma once
// Device checks: the spatial kernels of kernels/indexed/ (conv, conv_transpose, pools, upsample) run by
// CudaExecutor on device copies against HostExecutor on the host copies of the same inputs.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include <ptrain/kernels/indexed/conv.hpp>
#include <ptrain/kernels/indexed/pool.hpp>
#include <ptrain/kernels/indexed/upsample.hpp>

#include "checks/common.cuh"

namespace ptrain::device_checks {

// Within rel of the host result's magnitude (at least 1): GEMMs add in another order on a GPU.
template <class T>
void expect_close_scaled(const Tensor<T, Cuda>& got, const Tensor<T>& want, double rel, const std::string& what) {
  double scale = 1;
  for (std::int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  expect_close(got, want, rel * scale, what);
}

template <class T>
void check_conv(const char* type, double rel) {
  struct Case {
    const char* name;
    Shape x, w;
    std::int64_t stride, pad, dilation, groups, budget;
  };
  const Case cases[] = {
      {"3x3 pad 1, one chunk", {4, 8, 33, 31}, {16, 8, 3, 3}, 1, 1, 1, 1, kernels::indexed::default_column_budget},
      {"3x3 pad 1, an image a chunk", {3, 8, 33, 31}, {16, 8, 3, 3}, 1, 1, 1, 1, 1},
      {"stride 2 dilation 2 groups 2, two images a chunk", {5, 6, 29, 30}, {8, 3, 3, 3}, 2, 2, 2, 2,
       2 * 3 * 9 * 15 * 15},
      {"1x1 pointwise", {3, 16, 17, 19}, {24, 16, 1, 1}, 1, 0, 1, 1, 1},
  };
  const kernels::HostExecutor host;
  const kernels::CudaExecutor device;
  for (const Case& c : cases) {
    const auto g = kernels::make_conv2d_geometry(c.x, c.w, c.stride, c.stride, c.pad, c.pad, c.dilation, c.dilation,
                                                 c.groups);
    const Shape ys{g.batch, g.out_channels, g.out_h, g.out_w};
    const Tensor<T> x = signed_values<T>(c.x, 11), w = signed_values<T>(c.w, 12), b = signed_values<T>({g.out_channels}, 13),
                    gy = signed_values<T>(ys, 14);
    const auto xd = x.template to<Cuda>(), wd = w.template to<Cuda>(), bd = b.template to<Cuda>(),
               gyd = gy.template to<Cuda>();
    Tensor<T> y(ys), gx(c.x), gw(c.w), gb({g.out_channels});
    Tensor<T, Cuda> yd(ys), gxd(c.x), gwd(c.w), gbd({g.out_channels});
    kernels::indexed::conv2d_forward<T>(host, g, x.data(), w.data(), b.data(), y.data(), c.budget);
    kernels::indexed::conv2d_forward<T>(device, g, xd.data(), wd.data(), bd.data(), yd.data(), c.budget);
    kernels::indexed::conv2d_backward<T>(host, g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), gb.data(),
                                         c.budget);
    kernels::indexed::conv2d_backward<T>(device, g, xd.data(), wd.data(), gyd.data(), gxd.data(), gwd.data(),
                                         gbd.data(), c.budget);
    const std::string t = std::string(": ") + c.name + " (" + type + ")";
    expect_close_scaled(yd, y, rel, "conv2d forward" + t);
    expect_close_scaled(gxd, gx, rel, "conv2d grad input" + t);
    expect_close_scaled(gwd, gw, rel, "conv2d grad weight" + t);
    expect_close_scaled(gbd, gb, rel, "conv2d grad bias" + t);
  }

  // conv_transpose2d: UNet's 2x2 stride 2 up-convolution and a 3x3 stride 2 output_pad 1 one.
  const Shape xs{4, 16, 15, 17};
  for (const std::int64_t kernel : {2, 3}) {
    const Shape wk{16, 8, kernel, kernel};
    const auto g = kernels::make_conv_transpose2d_geometry(xs, wk, 2, 2, kernel == 3, kernel == 3, kernel == 3,
                                                           kernel == 3, 1, 1, 1);
    const Shape ys{g.batch, g.in_channels, g.in_h, g.in_w};
    const Tensor<T> x = signed_values<T>(xs, 21), w = signed_values<T>(wk, 22), b = signed_values<T>({g.in_channels}, 23),
                    gy = signed_values<T>(ys, 24);
    const auto xd = x.template to<Cuda>(), wd = w.template to<Cuda>(), bd = b.template to<Cuda>(),
               gyd = gy.template to<Cuda>();
    Tensor<T> y(ys), gx(xs), gw(wk), gb({g.in_channels});
    Tensor<T, Cuda> yd(ys), gxd(xs), gwd(wk), gbd({g.in_channels});
    kernels::indexed::conv_transpose2d_forward<T>(host, g, x.data(), w.data(), b.data(), y.data());
    kernels::indexed::conv_transpose2d_forward<T>(device, g, xd.data(), wd.data(), bd.data(), yd.data());
    kernels::indexed::conv_transpose2d_backward<T>(host, g, x.data(), w.data(), gy.data(), gx.data(), gw.data(),
                                                   gb.data());
    kernels::indexed::conv_transpose2d_backward<T>(device, g, xd.data(), wd.data(), gyd.data(), gxd.data(),
                                                   gwd.data(), gbd.data());
    const std::string t = std::string(": ") + std::to_string(kernel) + "x" + std::to_string(kernel) + " stride 2 (" +
                          type + ")";
    expect_close_scaled(yd, y, rel, "conv_transpose2d forward" + t);
    expect_close_scaled(gxd, gx, rel, "conv_transpose2d grad input" + t);
    expect_close_scaled(gwd, gw, rel, "conv_transpose2d grad weight" + t);
    expect_close_scaled(gbd, gb, rel, "conv_transpose2d grad bias" + t);
  }
}

template <class T>
void check_pool(const char* type, double rel) {
  const kernels::HostExecutor host;
  const kernels::CudaExecutor device;
  const Shape xs{8, 24, 57, 43};
  const Tensor<T> x = signed_values<T>(xs, 31);
  const auto xd = x.template to<Cuda>();
  const std::string t = std::string(" (") + type + ")";
  // ResNet's 3x3 stride 2 pad 1 max pool; an average one with ceil_mode and padding not counted.
  for (const bool count_include_pad : {true, false}) {
    const auto g = kernels::make_pool2d_geometry(xs, 3, 3, 2, 2, 1, 1, !count_include_pad, count_include_pad, "pool");
    const Shape ys{g.batch, g.channels, g.out_h, g.out_w};
    const Tensor<T> gy = signed_values<T>(ys, 32);
    const auto gyd = gy.template to<Cuda>();
    Tensor<T> y(ys), gx(xs);
    Tensor<T, Cuda> yd(ys), gxd(xs);
    Tensor<std::int32_t> index(ys);
    Tensor<std::int32_t, Cuda> indexd(ys);
    kernels::indexed::max_pool2d_forward(host, g, x.data(), y.data(), index.data());
    kernels::indexed::max_pool2d_forward(device, g, xd.data(), yd.data(), indexd.data());
    kernels::indexed::max_pool2d_backward(host, g, gy.data(), index.data(), gx.data());
    kernels::indexed::max_pool2d_backward(device, g, gyd.data(), indexd.data(), gxd.data());
    expect(first_mismatch(yd.to_vector(), y, 0) < 0, "max_pool2d forward" + t);
    expect(indexd.to_vector() == index.to_vector(), "max_pool2d argmax" + t);
    expect(first_mismatch(gxd.to_vector(), gx, 0) < 0, "max_pool2d backward" + t);
    kernels::indexed::avg_pool2d_forward(host, g, x.data(), y.data());
    kernels::indexed::avg_pool2d_forward(device, g, xd.data(), yd.data());
    kernels::indexed::avg_pool2d_backward(host, g, gy.data(), gx.data());
    kernels::indexed::avg_pool2d_backward(device, g, gyd.data(), gxd.data());
    const std::string pad = count_include_pad ? ", padding counted" : ", ceil_mode, padding not counted";
    expect_close_scaled(yd, y, rel, "avg_pool2d forward" + pad + t);
    expect_close_scaled(gxd, gx, rel, "avg_pool2d backward" + pad + t);
  }
  for (const auto& [OH, OW] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {6, 5}, {80, 70}}) {
    const std::int64_t planes = xs[0] * xs[1], H = xs[2], W = xs[3];
    const Tensor<T> gy = signed_values<T>({planes, OH, OW}, 33);
    const auto gyd = gy.template to<Cuda>();
    Tensor<T> y({planes, OH, OW}), gx(xs);
    Tensor<T, Cuda> yd({planes, OH, OW}), gxd(xs);
    kernels::indexed::adaptive_avg_pool2d_forward(host, planes, H, W, OH, OW, x.data(), y.data());
    kernels::indexed::adaptive_avg_pool2d_forward(device, planes, H, W, OH, OW, xd.data(), yd.data());
    kernels::indexed::adaptive_avg_pool2d_backward(host, planes, H, W, OH, OW, gy.data(), gx.data());
    kernels::indexed::adaptive_avg_pool2d_backward(device, planes, H, W, OH, OW, gyd.data(), gxd.data());
    const std::string size = " to " + std::to_string(OH) + "x" + std::to_string(OW);
    expect_close_scaled(yd, y, rel, "adaptive_avg_pool2d forward" + size + t);
    expect_close_scaled(gxd, gx, rel, "adaptive_avg_pool2d backward" + size + t);
  }
}

template <class T>
void check_upsample(const char* type, double rel) {
  const kernels::HostExecutor host;
  const kernels::CudaExecutor device;
  const Shape xs{4, 16, 37, 29};
  const Tensor<T> x = signed_values<T>(xs, 41);
  const auto xd = x.template to<Cuda>();
  struct Case {
    const char* name;
    bool bilinear, align_corners;
    std::int64_t out_h, out_w;
    double scale;
  };
  const Case cases[] = {{"nearest x2", false, false, 74, 58, 2.0},
                        {"nearest down", false, false, 15, 11, 0},
                        {"bilinear x2", true, false, 74, 58, 2.0},
                        {"bilinear align_corners to 50x61", true, true, 50, 61, 0},
                        {"bilinear down", true, false, 20, 13, 0}};
  for (const Case& c : cases) {
    const auto g = kernels::make_interpolation2d(xs, c.bilinear, c.align_corners, c.out_h, c.out_w, c.scale, c.scale);
    const Shape ys{xs[0], xs[1], c.out_h, c.out_w};
    const Tensor<T> gy = signed_values<T>(ys, 42);
    const auto gyd = gy.template to<Cuda>();
    Tensor<T> y(ys), gx(xs);
    Tensor<T, Cuda> yd(ys), gxd(xs);
    kernels::indexed::interpolate2d_forward(host, g, x.data(), y.data());
    kernels::indexed::interpolate2d_forward(device, g, xd.data(), yd.data());
    kernels::indexed::interpolate2d_backward(host, g, gy.data(), gx.data());
    kernels::indexed::interpolate2d_backward(device, g, gyd.data(), gxd.data());
    const std::string t = std::string(": ") + c.name + " (" + type + ")";
    expect_close_scaled(yd, y, rel, "upsample forward" + t);
    expect_close_scaled(gxd, gx, rel, "upsample backward" + t);
  }
}

inline void check_spatial() {
  check_conv<float>("float", 1e-5);
  check_conv<double>("double", 1e-12);
  check_conv<half>("half", 1e-2);
  check_conv<bfloat16>("bfloat16", 5e-2);
  check_pool<float>("float", 1e-6);
  check_pool<double>("double", 1e-14);
  check_pool<half>("half", 1e-3);
  check_pool<bfloat16>("bfloat16", 1e-2);
  check_upsample<float>("float", 1e-6);
  check_upsample<double>("double", 1e-14);
  check_upsample<half>("half", 1e-3);
  check_upsample<bfloat16>("bfloat16", 1e-2);
}

}  // namespace ptrain::device_checks
