// kernels/indexed/upsample.hpp run by HostExecutor against the CPU kernels of
// kernels/cpu/upsample.hpp: nearest and bilinear (align_corners false and true), up and down, to a
// size or by a scale.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <ptrain/kernels/cpu/upsample.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/upsample.hpp>

#include "spatial_compare.hpp"

using namespace ptrain;
using namespace ptrain::test;
namespace ix = ptrain::kernels::indexed;

BOOST_AUTO_TEST_SUITE(upsample_kernels_test)

namespace {

struct ResizeCase {
  Shape x;
  std::int64_t out_h, out_w;
  double scale_h, scale_w;  // 0: a size was asked for
};

const std::vector<ResizeCase>& resize_cases() {
  static const std::vector<ResizeCase> all{
      {{2, 3, 4, 5}, 8, 10, 2.0, 2.0},     // UNet's x2
      {{2, 3, 4, 5}, 8, 10, 0, 0},         // the same as a size
      {{1, 2, 5, 7}, 12, 9, 0, 0},         // odd ratios
      {{2, 2, 9, 11}, 4, 5, 0, 0},         // downsampling: some inputs have no reader
      {{1, 3, 6, 5}, 6, 5, 0, 0},          // identity
      {{1, 2, 3, 4}, 10, 11, 3.5, 2.75},   // fractional scales
      {{2, 1, 1, 1}, 3, 4, 0, 0},          // one pixel
      {{1, 2, 7, 6}, 1, 1, 0, 0},          // to one pixel
  };
  return all;
}

template <class T>
void check_resize(const ResizeCase& c, bool bilinear, bool align_corners) {
  const kernels::Interpolation2d g =
      kernels::make_interpolation2d(c.x, bilinear, align_corners, c.out_h, c.out_w, c.scale_h, c.scale_w);
  const Shape y_shape{c.x[0], c.x[1], c.out_h, c.out_w};
  const Tensor<T> x = seeded<T>(c.x, 1), gy = seeded<T>(y_shape, 2);
  Tensor<T> y(y_shape), gx(c.x);
  kernels::interpolate2d_forward(g, x.data(), y.data());
  kernels::interpolate2d_backward(g, gy.data(), gx.data());
  const kernels::HostExecutor ex;
  Tensor<T> got_y = poisoned<T>(y_shape), got_gx = poisoned<T>(c.x);
  ix::interpolate2d_forward(ex, g, x.data(), got_y.data());
  ix::interpolate2d_backward(ex, g, gy.data(), got_gx.data());
  const std::string what = std::string(bilinear ? (align_corners ? "bilinear, align_corners" : "bilinear")
                                                : "nearest") +
                           " " + std::to_string(c.x[2]) + "x" + std::to_string(c.x[3]) + " -> " +
                           std::to_string(c.out_h) + "x" + std::to_string(c.out_w) + " (" + scalar_name<T> + ")";
  // Same arithmetic in the same order: equal, not merely close. The CPU kernel adds 16-bit
  // gradients in T where the executor adds in float.
  const double tol = is_reduced_float_v<T> ? spatial_tolerance<T> : 0.0;
  BOOST_TEST(scaled_error(got_y, y) <= tol, what << ": forward, error " << scaled_error(got_y, y));
  BOOST_TEST(scaled_error(got_gx, gx) <= tol, what << ": backward, error " << scaled_error(got_gx, gx));
}

template <class T>
void check_all() {
  for (const auto& c : resize_cases()) {
    check_resize<T>(c, false, false);
    check_resize<T>(c, true, false);
    check_resize<T>(c, true, true);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(resizing_matches_the_cpu_kernels_in_double_and_float) {
  check_all<double>();
  check_all<float>();
}

BOOST_AUTO_TEST_CASE(resizing_in_half_and_bfloat16_matches_the_cpu_kernels) {
  check_all<ptrain::half>();
  check_all<ptrain::bfloat16>();
}

BOOST_AUTO_TEST_CASE(taps_kept_for_backward_give_the_same_gradient) {
  const kernels::Interpolation2d g = kernels::make_interpolation2d({2, 2, 5, 6}, true, false, 9, 13, 0, 0);
  const kernels::HostExecutor ex;
  const auto taps = ix::interpolation_taps(ex, g);
  const Tensor<double> gy = seeded<double>({2, 2, 9, 13}, 3);
  Tensor<double> kept({2, 2, 5, 6}), fresh({2, 2, 5, 6});
  ix::interpolate2d_backward(ex, g, taps, gy.data(), kept.data());
  ix::interpolate2d_backward(ex, g, gy.data(), fresh.data());
  BOOST_TEST(scaled_error(kept, fresh) == 0.0);
  const kernels::Interpolation2d other = kernels::make_interpolation2d({2, 2, 5, 6}, true, false, 10, 13, 0, 0);
  BOOST_CHECK_THROW(ix::interpolate2d_backward(ex, other, taps, gy.data(), kept.data()), Error);
}

BOOST_AUTO_TEST_CASE(readers_list_every_output_reading_an_input) {
  // Brute force: for each input index, the outputs listed are exactly those whose tap reads it
  // (and none at all for an input no output reads).
  for (const bool bilinear : {false, true})
    for (const bool align_corners : {false, true})
      for (std::int64_t in = 1; in <= 7; ++in)
        for (std::int64_t out = 1; out <= 9; ++out) {
          const auto taps = bilinear ? kernels::linear_taps(in, out, align_corners, 0)
                                     : kernels::nearest_taps(in, out, 0);
          std::vector<std::int64_t> readers;
          ix::detail::append_readers(taps, in, readers);
          for (std::int64_t i = 0; i < in; ++i) {
            std::int64_t first = -1, last = -1;
            for (std::int64_t o = 0; o < out; ++o) {
              const auto& t = taps[static_cast<std::size_t>(o)];
              if (t.i0 != i && t.i1 != i) continue;
              if (first < 0) first = o;
              BOOST_TEST((last < 0 || last == o), "outputs reading " << i << " are not contiguous");
              last = o + 1;
            }
            if (first < 0) first = last = 0;
            BOOST_TEST(readers[2 * static_cast<std::size_t>(i)] == first);
            BOOST_TEST(readers[2 * static_cast<std::size_t>(i) + 1] == last);
          }
        }
}

BOOST_AUTO_TEST_SUITE_END()
