#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <ptrain/data/color_transforms.hpp>

#include "../common/ramp.hpp"

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(color_transforms_test)

using Values = std::vector<float>;

namespace {
using test::check_close;

Tensor<float> ramp(std::int64_t c, std::int64_t h, std::int64_t w) { return test::reference_ramp(c, h, w); }
}  // namespace

// References: torchvision 0.14 F.adjust_contrast(ramp(...), factor) on float tensors.
BOOST_AUTO_TEST_CASE(adjust_contrast_matches_torchvision) {
  Tensor<float> x = ramp(3, 2, 3);
  adjust_contrast(x, 0.5f);
  check_close(x, {0.236968338, 0.386968344, 0.53696835, 0.586968303, 0.736968338, 0.336968333, 0.686968327, 0.28696835,
                  0.436968327, 0.486968338, 0.636968374, 0.236968338, 0.586968303, 0.736968338, 0.336968333,
                  0.386968344, 0.53696835, 0.686968327});
  x = ramp(3, 2, 3);
  adjust_contrast(x, 1.7f);  // clamped to [0, 1]
  check_close(x, {0, 0.178244382, 0.688244462, 0.858244419, 1, 0.00824433565, 1, 0, 0.348244339, 0.518244386, 1, 0,
                  0.858244419, 1, 0.00824433565, 0.178244382, 0.688244462, 1});
  Tensor<float> gray = ramp(1, 2, 3);
  adjust_contrast(gray, 2.0f);
  check_close(gray, {0, 0.133333355, 0.733333349, 0.933333278, 1, 0});
  Tensor<float> two(Shape{2, 1, 1});
  BOOST_CHECK_THROW(adjust_contrast(two, 1.0f), Error);
}

BOOST_AUTO_TEST_CASE(random_contrast_draws_within_its_range) {
  Rng rng(1);
  Tensor<float> x = ramp(3, 2, 3);
  RandomContrast(0.0)(x, rng);  // factor 1: unchanged
  check_close(x, ramp(3, 2, 3).to_vector());
  Tensor<float> half = ramp(3, 2, 3), expected = ramp(3, 2, 3);
  RandomContrast(0.5, 0.5)(half, rng);
  adjust_contrast(expected, 0.5f);
  check_close(half, expected.to_vector());
  // Strength 0.4: factors in [0.6, 1.4]; the spread of a flat-mean image grows with the factor.
  const Tensor<float> gray = Tensor<float>::from({1, 1, 2}, {0.4f, 0.6f});
  double lowest = 1, highest = 0;
  for (int i = 0; i < 500; ++i) {
    Tensor<float> y = gray.clone();
    RandomContrast(0.4)(y, rng);
    const double factor = (y[1] - y[0]) / 0.2;
    lowest = std::min(lowest, factor);
    highest = std::max(highest, factor);
  }
  BOOST_TEST(lowest >= 0.6 - 1e-5);
  BOOST_TEST(lowest < 0.65);
  BOOST_TEST(highest <= 1.4 + 1e-5);
  BOOST_TEST(highest > 1.35);
  BOOST_CHECK_THROW(RandomContrast(0.8, 0.7), Error);
}

BOOST_AUTO_TEST_SUITE_END()
