#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <ptrain/data/transforms.hpp>

#include "../common/ramp.hpp"

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(transforms_test)

using Values = std::vector<float>;

namespace {
// [C, H, W] with element (c, h, w) = 100 c + 10 h + w + 1 (so a zero is always padding).
Tensor<float> ramp(std::int64_t c, std::int64_t h, std::int64_t w) {
  return test::ramp_by(c, h, w, [](std::int64_t i, std::int64_t j, std::int64_t k) {
    return static_cast<float>(100 * i + 10 * j + k + 1);
  });
}
}  // namespace

BOOST_AUTO_TEST_CASE(hflip_reverses_each_row) {
  Tensor<float> x = ramp(2, 2, 3);
  hflip(x);
  BOOST_TEST(x.to_vector() == (Values{3, 2, 1, 13, 12, 11, 103, 102, 101, 113, 112, 111}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(pad_crop_matches_hand_computed_windows) {
  const Tensor<float> x = ramp(1, 3, 3);  // rows 1 2 3 / 11 12 13 / 21 22 23
  // Padded by 1 the image is 5x5; the 3x3 window at (0, 0) takes the top-left corner.
  BOOST_TEST(pad_crop(x, 0, 0, 3, 3, 1).to_vector() == (Values{0, 0, 0, 0, 1, 2, 0, 11, 12}),
             boost::test_tools::per_element());
  BOOST_TEST(pad_crop(x, 2, 2, 3, 3, 1).to_vector() == (Values{12, 13, 0, 22, 23, 0, 0, 0, 0}),
             boost::test_tools::per_element());
  BOOST_TEST(pad_crop(x, 1, 1, 3, 3, 1).to_vector() == x.to_vector(), boost::test_tools::per_element());
  BOOST_TEST(pad_crop(x, 0, 2, 2, 3, 1).to_vector() == (Values{0, 0, 0, 2, 3, 0}),
             boost::test_tools::per_element());
  // Without padding: a plain window.
  BOOST_TEST(pad_crop(x, 1, 0, 2, 2).to_vector() == (Values{11, 12, 21, 22}),
             boost::test_tools::per_element());
  // Padding wider than the image: an all-padding row and column.
  BOOST_TEST(pad_crop(x, 0, 0, 2, 2, 4).to_vector() == (Values{0, 0, 0, 0}),
             boost::test_tools::per_element());
  const Tensor<float> two = ramp(2, 2, 2);
  BOOST_TEST(pad_crop(two, 1, 0, 2, 2, 1).to_vector() == (Values{0, 1, 0, 11, 0, 101, 0, 111}),
             boost::test_tools::per_element());
  BOOST_CHECK_THROW(pad_crop(x, 3, 0, 3, 3, 1), Error);
}

BOOST_AUTO_TEST_CASE(random_crop_picks_every_window_and_only_those) {
  const Tensor<float> x = ramp(2, 4, 4);
  const RandomCrop crop(4, 2);  // 5 x 5 possible windows
  Rng rng(3);
  std::set<std::vector<float>> seen;
  for (int i = 0; i < 2000; ++i) {
    Tensor<float> y = x.clone();
    crop(y, rng);
    BOOST_REQUIRE(y.shape() == x.shape());
    seen.insert(y.to_vector());
  }
  std::set<std::vector<float>> windows;
  for (std::int64_t top = 0; top <= 4; ++top)
    for (std::int64_t left = 0; left <= 4; ++left)
      windows.insert(pad_crop(x, top, left, 4, 4, 2).to_vector());
  BOOST_TEST(windows.size() == 25u);
  BOOST_TEST((seen == windows));
}

BOOST_AUTO_TEST_CASE(random_crop_to_a_smaller_size) {
  const Tensor<float> x = ramp(1, 5, 6);
  const RandomCrop crop(3, 4, 0);
  Rng rng(1);
  std::set<std::vector<float>> seen;
  for (int i = 0; i < 500; ++i) {
    Tensor<float> y = x.clone();
    crop(y, rng);
    BOOST_REQUIRE(y.shape() == (Shape{1, 3, 4}));
    seen.insert(y.to_vector());
  }
  BOOST_TEST(seen.size() == 9u);  // 3 tops x 3 lefts
  BOOST_TEST(seen.count(pad_crop(x, 2, 2, 3, 4).to_vector()) == 1u);
  Tensor<float> small = ramp(1, 2, 2);
  BOOST_CHECK_THROW(RandomCrop(3)(small, rng), Error);
}

BOOST_AUTO_TEST_CASE(random_flip_flips_about_half_the_time) {
  const Tensor<float> x = ramp(3, 2, 5);
  Tensor<float> flipped = x.clone();
  hflip(flipped);
  const RandomHorizontalFlip flip;
  Rng rng(9);
  int flips = 0;
  for (int i = 0; i < 4000; ++i) {
    Tensor<float> y = x.clone();
    flip(y, rng);
    const auto v = y.to_vector();
    BOOST_REQUIRE((v == x.to_vector() || v == flipped.to_vector()));
    flips += v == flipped.to_vector();
  }
  BOOST_TEST(flips > 1800);  // 2000 expected, sd ~32
  BOOST_TEST(flips < 2200);
  Tensor<float> y = x.clone();
  RandomHorizontalFlip(1.0)(y, rng);
  BOOST_TEST(y.to_vector() == flipped.to_vector());
  RandomHorizontalFlip(0.0)(y, rng);
  BOOST_TEST(y.to_vector() == flipped.to_vector());
}

BOOST_AUTO_TEST_CASE(normalize_per_channel) {
  Tensor<float> x = Tensor<float>::from({2, 1, 2}, {0.0f, 1.0f, 0.5f, 0.25f});
  Rng rng;
  Normalize({0.5f, 0.25f}, {0.5f, 0.125f})(x, rng);
  BOOST_TEST(x.to_vector() == (Values{-1.0f, 1.0f, 2.0f, 0.0f}), boost::test_tools::per_element());
  Tensor<float> y = Tensor<float>::from({3, 1, 1}, {0.2f, 0.4f, 0.6f});
  Normalize({0.2f}, {0.1f})(y, rng);  // one value for every channel
  const Values expected = {0.0f, 2.0f, 4.0f};
  for (std::int64_t i = 0; i < 3; ++i)
    BOOST_TEST(y[i] == expected[static_cast<std::size_t>(i)], boost::test_tools::tolerance(1e-6f));
  BOOST_CHECK_THROW(Normalize({0.1f, 0.2f}, {1.0f, 1.0f})(y, rng), Error);
  BOOST_CHECK_THROW(Normalize({0.1f}, {0.0f}), Error);
}

BOOST_AUTO_TEST_CASE(compose_applies_in_order) {
  // Flip (always), then normalize: order matters because the means differ per channel.
  const Compose pipeline{RandomHorizontalFlip(1.0), Normalize({1.0f, 2.0f}, {1.0f, 2.0f})};
  static_assert(Transform<decltype(pipeline)>);
  Tensor<float> x = Tensor<float>::from({2, 1, 2}, {1.0f, 3.0f, 2.0f, 6.0f});
  Rng rng;
  pipeline(x, rng);
  BOOST_TEST(x.to_vector() == (Values{2.0f, 0.0f, 2.0f, 0.0f}), boost::test_tools::per_element());
  // Any callable with the Transform signature composes; (2x) + 1 is not 2(x + 1).
  const auto twice = [](Tensor<float>& t, Rng&) { t.array() *= 2.0f; };
  const auto plus_one = [](Tensor<float>& t, Rng&) { t.array() += 1.0f; };
  Tensor<float> z = Tensor<float>::from({1, 1, 1}, {3.0f});
  Compose{twice, plus_one}(z, rng);
  BOOST_TEST(z[0] == 7.0f);
  Compose{plus_one, twice}(z, rng);
  BOOST_TEST(z[0] == 16.0f);
  // Same seed, same result: crops and flips are reproducible.
  const Compose augment{RandomCrop(4, 2), RandomHorizontalFlip()};
  Rng a(5), b(5);
  for (int i = 0; i < 20; ++i) {
    Tensor<float> p = ramp(3, 4, 4), q = ramp(3, 4, 4);
    augment(p, a);
    augment(q, b);
    BOOST_REQUIRE(p.to_vector() == q.to_vector());
  }
}

BOOST_AUTO_TEST_CASE(paired_forms_crop_and_flip_the_mask_with_the_image) {
  // The image holds the class of each pixel (ramp: 1..4, 11..14, 21..24); padding is 0 in both.
  const Tensor<float> image = ramp(1, 3, 4);
  Tensor<std::int64_t> classes(Shape{3, 4});
  for (std::int64_t i = 0; i < 12; ++i) classes[i] = static_cast<std::int64_t>(image[i]);
  const Compose augment{RandomCrop(3, 4, 2), RandomHorizontalFlip()};
  static_assert(PairedTransform<decltype(augment)>);
  Rng rng(6);
  std::set<std::vector<std::int64_t>> seen;
  for (int i = 0; i < 500; ++i) {
    Tensor<float> x = image.clone();
    Tensor<std::int64_t> map = classes.clone();
    augment(x, map, rng);
    BOOST_REQUIRE(map.shape() == (Shape{3, 4}));
    for (std::int64_t p = 0; p < 12; ++p) BOOST_REQUIRE(static_cast<float>(map[p]) == x[p]);
    seen.insert(map.to_vector());
  }
  BOOST_TEST(seen.size() == 50u);  // 5 x 5 windows, flipped or not
  // Steps without a paired form (Normalize, a lambda) change the image only.
  const Compose photometric{Normalize({1.0f}, {2.0f}), [](Tensor<float>& t, Rng&) { t.array() += 1.0f; }};
  Tensor<float> x = image.clone();
  Tensor<std::int64_t> map = classes.clone();
  photometric(x, map, rng);
  BOOST_TEST(x[0] == 1.0f);  // (1 - 1) / 2 + 1
  BOOST_TEST(map.to_vector() == classes.to_vector(), boost::test_tools::per_element());
  Tensor<std::int64_t> wrong(Shape{4, 3});
  BOOST_CHECK_THROW(RandomCrop(3)(x, wrong, rng), Error);
}

BOOST_AUTO_TEST_CASE(transforms_want_one_chw_example) {
  Tensor<float> batch(Shape{2, 1, 2, 2});
  Rng rng;
  BOOST_CHECK_THROW(RandomCrop(2, 1)(batch, rng), Error);
  BOOST_CHECK_THROW(Normalize({0.0f}, {1.0f})(batch, rng), Error);
}

BOOST_AUTO_TEST_SUITE_END()
