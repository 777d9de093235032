// triplet_transfer's --augment (examples/common/frame_augmentation.hpp): over many draws a frame
// comes out in each of its eight flips and quarter turns, and with its contrast jittered.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include <ptrain/core/rng.hpp>

#include "../../examples/common/frame_augmentation.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(frame_augmentation_test)

BOOST_AUTO_TEST_CASE(frames_come_out_in_every_flip_and_quarter_turn_with_their_contrast_jittered) {
  // A grey 4x4 frame, darker at (0, 0) and brightest at (0, 1): where the brightest pixel lands
  // tells the flips and turns apart (its eight images under them are eight places).
  Tensor<float> frame(Shape{3, 4, 4});
  for (std::int64_t c = 0; c < 3; ++c)
    for (std::int64_t i = 0; i < 16; ++i) frame[c * 16 + i] = i == 1 ? 0.9f : i == 0 ? 0.1f : 0.3f;
  const AnyTransform augment = examples::frame_augmentation();
  Rng rng(5);
  std::set<std::pair<std::int64_t, std::int64_t>> brightest_at;
  float least_spread = 1, most_spread = 0;
  for (int draw = 0; draw < 400; ++draw) {
    Tensor<float> x = frame.clone();
    augment(x, rng);
    BOOST_REQUIRE(x.shape() == frame.shape());
    const float* p = x.data();
    const auto brightest = std::max_element(p, p + 16) - p;
    brightest_at.emplace(brightest / 4, brightest % 4);
    const float spread = *std::max_element(p, p + 16) - *std::min_element(p, p + 16);
    least_spread = std::min(least_spread, spread);
    most_spread = std::max(most_spread, spread);
  }
  const std::set<std::pair<std::int64_t, std::int64_t>> dihedral{{0, 1}, {0, 2}, {3, 1}, {3, 2},
                                                                 {1, 0}, {2, 0}, {1, 3}, {2, 3}};
  BOOST_TEST((brightest_at == dihedral), "the brightest pixel landed in " << brightest_at.size() << " of its 8 places");
  // 0.8 apart in the frame; contrast factors in [0.8, 1.2] make it 0.64 to 0.96 (or clipped at 1).
  BOOST_TEST(least_spread < 0.7f);
  BOOST_TEST(most_spread > 0.85f);
}

BOOST_AUTO_TEST_SUITE_END()
