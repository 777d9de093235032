// kernels/indexed/conv.hpp run by HostExecutor against the CPU kernels of kernels/cpu/conv.hpp
// and conv_transpose.hpp: forward, every gradient, several chunkings of the batch.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <ptrain/kernels/cpu/conv.hpp>
#include <ptrain/kernels/cpu/conv_transpose.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/conv.hpp>

#include "spatial_compare.hpp"

using namespace ptrain;
using namespace ptrain::test;
namespace ix = ptrain::kernels::indexed;

BOOST_AUTO_TEST_SUITE(conv_kernels_test)

namespace {

struct ConvCase {
  const char* name;
  Shape x, w;
  std::int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> all{
      {"3x3 pad 1", {3, 4, 7, 5}, {6, 4, 3, 3}, 1, 1, 1, 1, 1, 1, 1},
      {"3x3 stride 2 pad 1, odd sizes", {3, 3, 9, 7}, {5, 3, 3, 3}, 2, 2, 1, 1, 1, 1, 1},
      {"5x3 stride (2, 3) pad (2, 0)", {2, 2, 11, 10}, {3, 2, 5, 3}, 2, 3, 2, 0, 1, 1, 1},
      {"dilation (2, 3) pad (2, 1)", {2, 3, 8, 9}, {4, 3, 3, 2}, 1, 1, 2, 1, 2, 3, 1},
      {"groups 2 stride 2", {3, 6, 7, 6}, {4, 3, 3, 3}, 2, 2, 1, 1, 1, 1, 2},
      {"depthwise", {2, 4, 6, 5}, {4, 1, 3, 3}, 1, 1, 1, 1, 1, 1, 4},
      {"1x1 pointwise, groups 3", {3, 6, 4, 5}, {9, 2, 1, 1}, 1, 1, 0, 0, 1, 1, 3},
      {"1x1 stride 2", {2, 5, 5, 7}, {3, 5, 1, 1}, 2, 2, 0, 0, 1, 1, 1},
      {"kernel as large as the padded input", {2, 2, 3, 4}, {3, 2, 5, 6}, 1, 1, 1, 1, 1, 1, 1},
      {"everything at once", {3, 4, 10, 9}, {6, 2, 3, 2}, 3, 2, 2, 1, 2, 3, 2},
  };
  return all;
}

kernels::Conv2dGeometry geometry(const ConvCase& c) {
  return kernels::make_conv2d_geometry(c.x, c.w, c.stride_h, c.stride_w, c.pad_h, c.pad_w, c.dilation_h,
                                       c.dilation_w, c.groups);
}

// Column budgets: everything in one chunk, one image per chunk, two per chunk (3 images leave one).
std::vector<std::int64_t> budgets(const kernels::Conv2dGeometry& g) {
  const std::int64_t per_image = g.col_rows() * g.out_plane();
  return {ix::default_column_budget, 1, 2 * per_image};
}

template <class T>
void check_conv2d(const ConvCase& c) {
  const kernels::Conv2dGeometry g = geometry(c);
  const Shape y_shape{g.batch, g.out_channels, g.out_h, g.out_w};
  const Tensor<T> x = seeded<T>(c.x, 1), w = seeded<T>(c.w, 2), b = seeded<T>({g.out_channels}, 3),
                  gy = seeded<T>(y_shape, 4);
  Tensor<T> y(y_shape), gx(c.x), gw(c.w), gb({g.out_channels});
  kernels::conv2d_forward<T>(g, x.data(), w.data(), b.data(), y.data());
  kernels::conv2d_backward<T>(g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), gb.data());
  Tensor<T> y_nobias(y_shape);
  kernels::conv2d_forward<T>(g, x.data(), w.data(), nullptr, y_nobias.data());
  const kernels::HostExecutor ex;
  for (const std::int64_t budget : budgets(g)) {
    const std::string what = std::string(c.name) + ", images per chunk " +
                             std::to_string(ix::images_per_chunk(g, budget)) + " (" + scalar_name<T> + ")";
    Tensor<T> got_y = poisoned<T>(y_shape), got_y_nobias = poisoned<T>(y_shape);
    ix::conv2d_forward<T>(ex, g, x.data(), w.data(), b.data(), got_y.data(), budget);
    ix::conv2d_forward<T>(ex, g, x.data(), w.data(), nullptr, got_y_nobias.data(), budget);
    expect_close(got_y, y, what + ": forward with bias");
    expect_close(got_y_nobias, y_nobias, what + ": forward without bias");
    Tensor<T> got_gx = poisoned<T>(c.x), got_gw = poisoned<T>(c.w), got_gb = poisoned<T>({g.out_channels});
    ix::conv2d_backward<T>(ex, g, x.data(), w.data(), gy.data(), got_gx.data(), got_gw.data(), got_gb.data(),
                           budget);
    expect_close(got_gx, gx, what + ": grad input");
    expect_close(got_gw, gw, what + ": grad weight");
    expect_close(got_gb, gb, what + ": grad bias");
    // One gradient at a time, as the autograd op asks when only one input needs it.
    Tensor<T> only_gx = poisoned<T>(c.x), only_gw = poisoned<T>(c.w);
    ix::conv2d_grad_input<T>(ex, g, w.data(), gy.data(), only_gx.data(), budget);
    ix::conv2d_grad_weight<T>(ex, g, x.data(), gy.data(), only_gw.data(), budget);
    expect_close(only_gx, gx, what + ": grad input alone");
    expect_close(only_gw, gw, what + ": grad weight alone");
  }
}

struct TransposeCase {
  const char* name;
  Shape x, w;
  std::int64_t stride_h, stride_w, pad_h, pad_w, output_pad_h, output_pad_w, dilation_h, dilation_w, groups;
};

const std::vector<TransposeCase>& transpose_cases() {
  static const std::vector<TransposeCase> all{
      {"UNet's 2x2 stride 2", {2, 4, 3, 5}, {4, 2, 2, 2}, 2, 2, 0, 0, 0, 0, 1, 1, 1},
      {"3x3 stride 1 pad 1", {3, 3, 4, 5}, {3, 2, 3, 3}, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {"3x3 stride 2 pad 1 output_pad 1", {2, 2, 3, 4}, {2, 3, 3, 3}, 2, 2, 1, 1, 1, 1, 1, 1, 1},
      {"everything at once", {3, 4, 3, 4}, {4, 1, 3, 2}, 3, 2, 1, 0, 2, 1, 1, 2, 2},
  };
  return all;
}

template <class T>
void check_conv_transpose2d(const TransposeCase& c) {
  const kernels::Conv2dGeometry g =
      kernels::make_conv_transpose2d_geometry(c.x, c.w, c.stride_h, c.stride_w, c.pad_h, c.pad_w, c.output_pad_h,
                                              c.output_pad_w, c.dilation_h, c.dilation_w, c.groups);
  const Shape y_shape{g.batch, g.in_channels, g.in_h, g.in_w};
  const Tensor<T> x = seeded<T>(c.x, 5), w = seeded<T>(c.w, 6), b = seeded<T>({g.in_channels}, 7),
                  gy = seeded<T>(y_shape, 8);
  Tensor<T> y(y_shape), gx(c.x), gw(c.w), gb({g.in_channels});
  kernels::conv_transpose2d_forward<T>(g, x.data(), w.data(), b.data(), y.data());
  kernels::conv_transpose2d_backward<T>(g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), gb.data());
  if constexpr (is_reduced_float_v<T>) {
    // The CPU kernel sums each 16-bit plane in T here (conv2d_grad_bias has no widening form);
    // the reference is the float sum, rounded once, as the executor's double sum rounds.
    Tensor<float> gbf({g.in_channels});
    kernels::conv2d_grad_bias<float>(kernels::detail::transposed_geometry(g), tensor_cast<float>(gy).data(),
                                     gbf.data());
    gb = tensor_cast<T>(gbf);
  }
  const kernels::HostExecutor ex;
  for (const std::int64_t budget : budgets(g)) {
    const std::string what = std::string(c.name) + ", images per chunk " +
                             std::to_string(ix::images_per_chunk(g, budget)) + " (" + scalar_name<T> + ")";
    Tensor<T> got_y = poisoned<T>(y_shape);
    ix::conv_transpose2d_forward<T>(ex, g, x.data(), w.data(), b.data(), got_y.data(), budget);
    expect_close(got_y, y, what + ": forward");
    Tensor<T> got_gx = poisoned<T>(c.x), got_gw = poisoned<T>(c.w), got_gb = poisoned<T>({g.in_channels});
    ix::conv_transpose2d_backward<T>(ex, g, x.data(), w.data(), gy.data(), got_gx.data(), got_gw.data(),
                                     got_gb.data(), budget);
    expect_close(got_gx, gx, what + ": grad input");
    expect_close(got_gw, gw, what + ": grad weight");
    expect_close(got_gb, gb, what + ": grad bias");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv2d_matches_the_cpu_kernels_in_double_and_float) {
  for (const auto& c : conv_cases()) {
    check_conv2d<double>(c);
    check_conv2d<float>(c);
  }
}

BOOST_AUTO_TEST_CASE(conv2d_in_half_and_bfloat16_matches_the_cpu_kernels) {
  for (const auto& c : conv_cases()) {
    check_conv2d<ptrain::half>(c);
    check_conv2d<ptrain::bfloat16>(c);
  }
}

BOOST_AUTO_TEST_CASE(conv_transpose2d_matches_the_cpu_kernels) {
  for (const auto& c : transpose_cases()) {
    check_conv_transpose2d<double>(c);
    check_conv_transpose2d<float>(c);
    check_conv_transpose2d<ptrain::half>(c);
  }
}

BOOST_AUTO_TEST_CASE(an_empty_batch_gives_zero_weight_and_bias_gradients) {
  const kernels::Conv2dGeometry g = kernels::make_conv2d_geometry({0, 2, 5, 5}, {3, 2, 3, 3}, 1, 1, 1, 1, 1, 1, 1);
  const Tensor<double> w = seeded<double>({3, 2, 3, 3}, 1);
  Tensor<double> gw = poisoned<double>({3, 2, 3, 3}), gb = poisoned<double>({3});
  ix::conv2d_backward<double>(kernels::HostExecutor{}, g, nullptr, w.data(), nullptr, nullptr, gw.data(), gb.data());
  BOOST_TEST(scaled_error(gw, Tensor<double>::zeros({3, 2, 3, 3})) == 0.0);
  BOOST_TEST(scaled_error(gb, Tensor<double>::zeros({3})) == 0.0);
}

BOOST_AUTO_TEST_CASE(chunks_hold_as_many_images_as_the_budget_allows) {
  const kernels::Conv2dGeometry g = kernels::make_conv2d_geometry({10, 2, 5, 5}, {3, 2, 3, 3}, 1, 1, 1, 1, 1, 1, 1);
  const std::int64_t per_image = 2 * 9 * 25;
  BOOST_TEST(ix::images_per_chunk(g, ix::default_column_budget) == 10);
  BOOST_TEST(ix::images_per_chunk(g, 3 * per_image + 1) == 3);
  BOOST_TEST(ix::images_per_chunk(g, per_image - 1) == 1);
}

BOOST_AUTO_TEST_SUITE_END()
