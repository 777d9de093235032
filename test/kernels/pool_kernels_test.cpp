// kernels/indexed/pool.hpp run by HostExecutor against the CPU kernels of kernels/cpu/pool.hpp:
// max (values, argmax, NaN and ties), average (padding counted or not, ceil_mode) and adaptive.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <ptrain/kernels/cpu/pool.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/pool.hpp>

#include "spatial_compare.hpp"

using namespace ptrain;
using namespace ptrain::test;
namespace ix = ptrain::kernels::indexed;

BOOST_AUTO_TEST_SUITE(pool_kernels_test)

namespace {

struct PoolCase {
  const char* name;
  Shape x;
  std::int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool ceil_mode, count_include_pad;
};

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> all{
      {"2x2 stride 2, even", {2, 3, 8, 6}, 2, 2, 0, 0, 0, 0, false, true},
      {"2x2 stride 2, odd sizes", {2, 3, 7, 9}, 2, 2, 0, 0, 0, 0, false, true},
      {"2x2 stride 2, rows of 19 outputs (whole vectors and a tail)", {2, 3, 6, 39}, 2, 2, 0, 0, 0, 0, false, true},
      {"2x2 stride 2, the small CNN's 28x28", {2, 4, 28, 28}, 2, 2, 0, 0, 0, 0, false, true},
      {"3x3 stride 2 pad 1 (ResNet's stem)", {2, 2, 11, 9}, 3, 3, 2, 2, 1, 1, false, true},
      {"3x3 stride 2 pad 1, padding not counted", {2, 2, 11, 9}, 3, 3, 2, 2, 1, 1, false, false},
      {"3x3 stride 2 ceil_mode (SqueezeNet)", {1, 3, 10, 13}, 3, 3, 2, 2, 0, 0, true, true},
      {"ceil_mode with padding, not counted", {2, 2, 8, 7}, 3, 2, 2, 3, 1, 1, true, false},
      {"3x3 stride 1 pad 1, overlapping", {2, 2, 5, 6}, 3, 3, 1, 1, 1, 1, false, true},
      {"5x3 stride (1, 2)", {1, 4, 9, 8}, 5, 3, 1, 2, 2, 0, false, false},
      {"1x1 planes", {3, 2, 1, 1}, 1, 1, 1, 1, 0, 0, false, true},
      {"window as large as the input", {2, 3, 4, 5}, 4, 5, 1, 1, 0, 0, false, true},
  };
  return all;
}

kernels::Pool2dGeometry geometry(const PoolCase& c) {
  return kernels::make_pool2d_geometry(c.x, c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.pad_h, c.pad_w,
                                       c.ceil_mode, c.count_include_pad, c.name);
}

// Inputs with ties (values from a few levels) so that the first maximum has to be the one kept.
template <class T>
Tensor<T> with_ties(const Shape& shape, std::uint64_t seed) {
  Tensor<double> t = random_tensor(shape, seed);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = std::round(t[i] * 3) / 4;
  return tensor_cast<T>(t);
}

template <class T>
void check_pool(const PoolCase& c) {
  const kernels::Pool2dGeometry g = geometry(c);
  const Shape y_shape{g.batch, g.channels, g.out_h, g.out_w};
  const kernels::HostExecutor ex;
  const std::string what = std::string(c.name) + " (" + scalar_name<T> + ")";
  for (const bool ties : {false, true}) {
    const Tensor<T> x = ties ? with_ties<T>(c.x, 1) : seeded<T>(c.x, 1), gy = seeded<T>(y_shape, 2);
    Tensor<T> y(y_shape), gx(c.x);
    Tensor<std::int32_t> index(y_shape);
    kernels::max_pool2d_forward(g, x.data(), y.data(), index.data());
    kernels::max_pool2d_backward(g, gy.data(), index.data(), gx.data());
    Tensor<T> got_y = poisoned<T>(y_shape), got_gx = poisoned<T>(c.x);
    Tensor<std::int32_t> got_index = Tensor<std::int32_t>::full(y_shape, -1);
    ix::max_pool2d_forward(ex, g, x.data(), got_y.data(), got_index.data());
    ix::max_pool2d_backward(ex, g, gy.data(), index.data(), got_gx.data());
    const std::string tie = ties ? " with ties" : "";
    expect_close(got_y, y, what + tie + ": max forward");
    BOOST_TEST(got_index.to_vector() == index.to_vector(), what << tie << ": max argmax");
    expect_close(got_gx, gx, what + tie + ": max backward");
  }
  const Tensor<T> x = seeded<T>(c.x, 3), gy = seeded<T>(y_shape, 4);
  Tensor<T> y(y_shape), gx(c.x);
  kernels::avg_pool2d_forward(g, x.data(), y.data());
  kernels::avg_pool2d_backward(g, gy.data(), gx.data());
  Tensor<T> got_y = poisoned<T>(y_shape), got_gx = poisoned<T>(c.x);
  ix::avg_pool2d_forward(ex, g, x.data(), got_y.data());
  ix::avg_pool2d_backward(ex, g, gy.data(), got_gx.data());
  expect_close(got_y, y, what + ": avg forward");
  expect_close(got_gx, gx, what + ": avg backward");
}

template <class T>
void check_adaptive(std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH, std::int64_t OW) {
  const kernels::HostExecutor ex;
  const Tensor<T> x = seeded<T>({planes, H, W}, 5), gy = seeded<T>({planes, OH, OW}, 6);
  Tensor<T> y({planes, OH, OW}), gx({planes, H, W});
  kernels::adaptive_avg_pool2d_forward(planes, H, W, OH, OW, x.data(), y.data());
  kernels::adaptive_avg_pool2d_backward(planes, H, W, OH, OW, gy.data(), gx.data());
  Tensor<T> got_y = poisoned<T>({planes, OH, OW}), got_gx = poisoned<T>({planes, H, W});
  ix::adaptive_avg_pool2d_forward(ex, planes, H, W, OH, OW, x.data(), got_y.data());
  ix::adaptive_avg_pool2d_backward(ex, planes, H, W, OH, OW, gy.data(), got_gx.data());
  const std::string what = std::to_string(H) + "x" + std::to_string(W) + " -> " + std::to_string(OH) + "x" +
                           std::to_string(OW) + " (" + scalar_name<T> + ")";
  expect_close(got_y, y, what + ": adaptive forward");
  expect_close(got_gx, gx, what + ": adaptive backward");
}

template <class T>
void check_all_adaptive() {
  check_adaptive<T>(3, 7, 7, 1, 1);     // global pooling
  check_adaptive<T>(2, 10, 9, 3, 4);    // overlapping windows
  check_adaptive<T>(2, 13, 11, 6, 6);   // Inception's 6x6 of odd sizes
  check_adaptive<T>(2, 5, 4, 5, 4);     // identity
  check_adaptive<T>(2, 3, 2, 7, 5);     // more outputs than inputs
  check_adaptive<T>(1, 1, 1, 2, 3);
}

}  // namespace

BOOST_AUTO_TEST_CASE(max_and_avg_pooling_match_the_cpu_kernels) {
  for (const auto& c : pool_cases()) {
    check_pool<double>(c);
    check_pool<float>(c);
    check_pool<ptrain::half>(c);
    check_pool<ptrain::bfloat16>(c);
  }
}

BOOST_AUTO_TEST_CASE(adaptive_avg_pooling_matches_the_cpu_kernels) {
  check_all_adaptive<double>();
  check_all_adaptive<float>();
  check_all_adaptive<ptrain::half>();
  check_all_adaptive<ptrain::bfloat16>();
}

template <class T>
void check_last_nan_kept(const Shape& shape, std::int64_t stride, const std::vector<std::int64_t>& nans) {
  const kernels::Pool2dGeometry g = kernels::make_pool2d_geometry(shape, 2, 2, stride, stride, 0, 0, false, true, "nan");
  Tensor<T> x = seeded<T>(shape, 7);
  for (const std::int64_t at : nans) x[at] = std::numeric_limits<T>::quiet_NaN();
  const Shape y_shape{shape[0], shape[1], g.out_h, g.out_w};
  Tensor<T> y(y_shape), got_y = poisoned<T>(y_shape);
  Tensor<std::int32_t> index(y_shape), got_index = Tensor<std::int32_t>::full(y_shape, -1);
  kernels::max_pool2d_forward(g, x.data(), y.data(), index.data());
  ix::max_pool2d_forward(kernels::HostExecutor{}, g, x.data(), got_y.data(), got_index.data());
  const std::string what = std::string(scalar_name<T>) + ", stride " + std::to_string(stride);
  BOOST_TEST(got_index.to_vector() == index.to_vector(), what);
  BOOST_TEST(scaled_error(got_y, y) == 0.0, what);  // NaN where the CPU has NaN, the same values elsewhere
  BOOST_TEST(std::isnan(got_y[0]), what);
}

BOOST_AUTO_TEST_CASE(max_pooling_keeps_the_last_nan_as_the_cpu_kernel_does) {
  check_last_nan_kept<double>({1, 1, 3, 4}, 1, {1, 6});
  // 2x2 at stride 2 (the CPU's vector path): one NaN per window in each position, two NaNs in one
  // window (the later is kept), and NaNs in a row's tail after two whole vectors of 8.
  for (const bool single : {false, true}) {
    const std::vector<std::int64_t> nans{0, 3, 40, 44, 45, 85, 38, 76, 77, 34, 151};
    if (single)
      check_last_nan_kept<float>({1, 1, 4, 38}, 2, nans);
    else
      check_last_nan_kept<double>({1, 1, 4, 38}, 2, nans);
  }
}

BOOST_AUTO_TEST_CASE(windows_holding_a_pixel_are_the_windows_that_read_it) {
  // Brute force over small sizes: o is listed exactly when its window covers i.
  for (std::int64_t kernel = 1; kernel <= 4; ++kernel)
    for (std::int64_t stride = 1; stride <= 3; ++stride)
      for (std::int64_t pad = 0; 2 * pad <= kernel; ++pad)
        for (std::int64_t out = 1; out <= 6; ++out)
          for (std::int64_t i = 0; i < 8; ++i) {
            const auto r = ix::windows_holding(i, kernel, stride, pad, out);
            for (std::int64_t o = 0; o < out; ++o) {
              const bool covers = o * stride - pad <= i && i < o * stride - pad + kernel;
              BOOST_TEST(covers == (r.first <= o && o <= r.last), "kernel " << kernel << " stride " << stride
                                                                            << " pad " << pad << " o " << o << " i " << i);
            }
          }
  for (std::int64_t in = 1; in <= 9; ++in)
    for (std::int64_t out = 1; out <= 9; ++out)
      for (std::int64_t i = 0; i < in; ++i) {
        const auto r = ix::adaptive_windows_holding(i, in, out);
        for (std::int64_t o = 0; o < out; ++o) {
          const bool covers = o * in / out <= i && i < ((o + 1) * in + out - 1) / out;
          BOOST_TEST(covers == (r.first <= o && o <= r.last), "in " << in << " out " << out << " o " << o << " i " << i);
        }
      }
}

BOOST_AUTO_TEST_SUITE_END()
