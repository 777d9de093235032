#include <boost/test/unit_test.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include <ptrain/data/geometric_transforms.hpp>

#include "../common/ramp.hpp"

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(geometric_transforms_test)

using Values = std::vector<float>;
using Labels = std::vector<std::int64_t>;

namespace {
using test::check_close;

Tensor<float> ramp(std::int64_t c, std::int64_t h, std::int64_t w) { return test::reference_ramp(c, h, w); }

template <class T>
Tensor<T> iota(const Shape& shape) {
  Tensor<T> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<T>(i);
  return t;
}

// An image whose channel 0 holds the class of each pixel, and that class map: a paired
// transform keeps them equal.
struct Pair {
  Tensor<float> image;
  Tensor<std::int64_t> map;
};
Pair labelled(std::int64_t h, std::int64_t w) {
  Pair p{Tensor<float>(Shape{2, h, w}), Tensor<std::int64_t>(Shape{h, w})};
  for (std::int64_t i = 0; i < h * w; ++i) {
    p.map[i] = 1 + i;
    p.image[i] = static_cast<float>(1 + i);
    p.image[h * w + i] = -1.0f;
  }
  return p;
}
void check_aligned(const Pair& p) {
  BOOST_REQUIRE(p.map.shape() == (Shape{p.image.size(1), p.image.size(2)}));
  for (std::int64_t i = 0; i < p.map.numel(); ++i) BOOST_REQUIRE(static_cast<float>(p.map[i]) == p.image[i]);
}
}  // namespace

// References: torch 1.13, F.interpolate(x[None], size, mode='bilinear', align_corners=False,
// antialias=False)[0] on ramp(...), printed with 9 significant digits.
BOOST_AUTO_TEST_CASE(bilinear_resize_matches_torch) {
  check_close(resize_bilinear(ramp(1, 4, 5), 6, 9),
              {0,           0.100000016, 0.26666671,  0.433333367, 0.600000083, 0.76666671,
               0.811110973, 0.366666496, 0.100000001, 0.349999994, 0.450000018, 0.616666675,
               0.538888872, 0.400000036, 0.566666722, 0.672222197, 0.533333302, 0.450000018,
               0.633333266, 0.73333329,  0.899999976, 0.6592592,   0.316666722, 0.381481498,
               0.466666698, 0.633333325, 0.73333329,  0.366666645, 0.466666669, 0.633333385,
               0.718518555, 0.783333242, 0.440740645, 0.200000048, 0.366666734, 0.466666669,
               0.650000095, 0.566666722, 0.427777737, 0.533333302, 0.699999928, 0.561111093,
               0.422222257, 0.283333272, 0.199999958, 1,           0.733333349, 0.288888842,
               0.333333373, 0.50000006,  0.666666746, 0.711111009, 0.266666532, 0});
  check_close(resize_bilinear(ramp(2, 5, 7), 3, 4),
              {0.345833331, 0.504166722, 0.387499958, 0.454166651, 0.412500054, 0.799999893, 0.362500012, 0.887499928,
               0.708333313, 0.270833373, 0.474999934, 0.495833337, 0.604166627, 0.304166675, 0.82916671,  0.391666651,
               0.212500021, 0.737499952, 0.300000012, 0.68749994,  0.508333325, 0.712499917, 0.595833361, 0.295833319});
  check_close(resize_bilinear(ramp(2, 5, 7), 7, 3),
              {0.200000003, 0.899999917, 0.49999994,  0.600000024, 0.671428502, 0.271428496, 0.785714269,
               0.385714263, 0.299999982, 0.5,         0.100000136, 0.799999952, 0.476190507, 0.600000024,
               0.514285624, 0.609523833, 0.628571332, 0.54285723,  0.800000012, 0.399999946, 0.733333468,
               0.366666704, 0.699999988, 0.299999952, 0.557142854, 0.471428543, 0.49047628,  0.585714281,
               0.5,         0.623809636, 0.299999982, 0.99999994,  0.599999905, 0.27619049,  0.714285672,
               0.314285606, 0.409523845, 0.428571463, 0.342857212, 0.599999964, 0.200000092, 0.53333348});
  const Tensor<float> same = ramp(3, 4, 4);
  BOOST_TEST(resize_bilinear(same, 4, 4).to_vector() == same.to_vector(), boost::test_tools::per_element());
}

// References: F.interpolate(..., mode='nearest') on arange.
BOOST_AUTO_TEST_CASE(nearest_resize_matches_torch) {
  BOOST_TEST(resize_nearest(iota<std::int64_t>({1, 4, 5}), 6, 9).to_vector() ==
                 (Labels{0,  0,  1,  1,  2,  2,  3,  3,  4,  0,  0,  1,  1,  2,  2,  3,  3,  4,
                         5,  5,  6,  6,  7,  7,  8,  8,  9,  10, 10, 11, 11, 12, 12, 13, 13, 14,
                         10, 10, 11, 11, 12, 12, 13, 13, 14, 15, 15, 16, 16, 17, 17, 18, 18, 19}),
             boost::test_tools::per_element());
  BOOST_TEST(resize_nearest(iota<std::int64_t>({1, 5, 7}), 3, 4).to_vector() ==
                 (Labels{0, 1, 3, 5, 7, 8, 10, 12, 21, 22, 24, 26}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(resize_transform_sizes_as_torchvision) {
  Rng rng;
  // One size: the shorter side becomes it, the longer floor(size * long / short).
  for (const auto& [h, w, size, eh, ew] :
       std::vector<std::array<std::int64_t, 5>>{{6, 4, 3, 4, 3}, {4, 7, 3, 3, 5}, {5, 7, 4, 4, 5}, {8, 8, 5, 5, 5}}) {
    Tensor<float> x = ramp(1, h, w);
    Resize{size}(x, rng);
    BOOST_TEST(x.shape() == (Shape{1, eh, ew}));
  }
  Tensor<float> x = ramp(2, 5, 7);
  Resize(3, 4)(x, rng);
  BOOST_TEST(x.to_vector() == resize_bilinear(ramp(2, 5, 7), 3, 4).to_vector());
  // Paired: the mask nearest, the image bilinear.
  Tensor<float> image = ramp(3, 4, 5);
  Tensor<std::int64_t> mask = iota<std::int64_t>({4, 5});
  Resize(6, 9)(image, mask, rng);
  BOOST_TEST(image.to_vector() == resize_bilinear(ramp(3, 4, 5), 6, 9).to_vector());
  BOOST_TEST(mask.shape() == (Shape{6, 9}));
  BOOST_TEST(mask.to_vector() == resize_nearest(iota<std::int64_t>({1, 4, 5}), 6, 9).to_vector());
  BOOST_CHECK_THROW(Resize(0, 3), Error);
}

// References: torchvision 0.14 F.center_crop(arange(35).reshape(1, 5, 7), [h, w]).
BOOST_AUTO_TEST_CASE(center_crop_matches_torchvision) {
  const Tensor<float> x = iota<float>({1, 5, 7});
  const auto crop = [&](std::int64_t h, std::int64_t w) { return center_crop(x, h, w).to_vector(); };
  BOOST_TEST(crop(3, 4) == (Values{9, 10, 11, 12, 16, 17, 18, 19, 23, 24, 25, 26}), boost::test_tools::per_element());
  BOOST_TEST(crop(2, 2) == (Values{16, 17, 23, 24}), boost::test_tools::per_element());  // round half to even
  BOOST_TEST(crop(4, 3) == (Values{2, 3, 4, 9, 10, 11, 16, 17, 18, 23, 24, 25}), boost::test_tools::per_element());
  // Larger than the image: zero-padded, the extra row or column at the bottom and right.
  BOOST_TEST(crop(7, 9) == (Values{0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  1,  2,  3,  4, 5, 6,  0,  0,  7,  8,
                                   9,  10, 11, 12, 13, 0,  0,  14, 15, 16, 17, 18, 19, 20, 0, 0, 21, 22, 23, 24, 25,
                                   26, 27, 0,  0,  28, 29, 30, 31, 32, 33, 34, 0,  0,  0,  0, 0, 0,  0,  0,  0,  0}),
             boost::test_tools::per_element());
  Values expected(42, 0.0f);
  for (int i = 0; i < 35; ++i) expected[static_cast<std::size_t>(i)] = static_cast<float>(i);
  BOOST_TEST(crop(6, 7) == expected, boost::test_tools::per_element());
}

// References: torch.rot90(arange(6).reshape(1, 2, 3), k, [1, 2]).
BOOST_AUTO_TEST_CASE(rot90_matches_torch) {
  const Tensor<std::int64_t> x = iota<std::int64_t>({1, 2, 3});
  BOOST_TEST(rot90(x, 0).to_vector() == (Labels{0, 1, 2, 3, 4, 5}), boost::test_tools::per_element());
  BOOST_TEST(rot90(x, 1).shape() == (Shape{1, 3, 2}));
  BOOST_TEST(rot90(x, 1).to_vector() == (Labels{2, 5, 1, 4, 0, 3}), boost::test_tools::per_element());
  BOOST_TEST(rot90(x, 2).to_vector() == (Labels{5, 4, 3, 2, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(rot90(x, 3).to_vector() == (Labels{3, 0, 4, 1, 5, 2}), boost::test_tools::per_element());
  BOOST_TEST(rot90(x, -1).to_vector() == rot90(x, 3).to_vector(), boost::test_tools::per_element());
  BOOST_TEST(rot90(rot90(x, 1), 3).to_vector() == x.to_vector(), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(vflip_reverses_rows_of_each_channel) {
  Tensor<float> x = iota<float>({2, 3, 2});
  vflip(x);
  BOOST_TEST(x.to_vector() == (Values{4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(random_flip_and_rotation_draw_every_outcome) {
  const Tensor<float> x = ramp(1, 3, 3);
  Rng rng(4);
  std::set<Values> flips, turns;
  int flipped = 0;
  for (int i = 0; i < 2000; ++i) {
    Tensor<float> a = x.clone(), b = x.clone();
    RandomVerticalFlip()(a, rng);
    RandomRotation90()(b, rng);
    flips.insert(a.to_vector());
    turns.insert(b.to_vector());
    flipped += a.to_vector() != x.to_vector();
  }
  BOOST_TEST(flips.size() == 2u);
  BOOST_TEST(flipped > 900);  // 1000 expected, sd ~22
  BOOST_TEST(flipped < 1100);
  BOOST_TEST(turns.size() == 4u);
  for (int k = 0; k < 4; ++k) BOOST_TEST(turns.count(rot90(x, k).to_vector()) == 1u);
}

BOOST_AUTO_TEST_CASE(paired_forms_move_image_and_mask_together) {
  const Compose augment{RandomCrop(4, 5, 1), RandomHorizontalFlip(), RandomVerticalFlip(), RandomRotation90(),
                        CenterCrop(3, 4)};
  static_assert(PairedTransform<decltype(augment)>);
  Rng rng(8);
  std::set<Labels> seen;
  for (int i = 0; i < 300; ++i) {
    Pair p = labelled(5, 6);
    augment(p.image, p.map, rng);
    check_aligned(p);
    seen.insert(p.map.to_vector());
  }
  BOOST_TEST(seen.size() > 50u);
  // Without a map, the paired form draws as the image-only form does.
  Rng a(3), b(3);
  for (int i = 0; i < 20; ++i) {
    Tensor<float> x = ramp(2, 5, 6), y = ramp(2, 5, 6);
    Tensor<std::int64_t> none;
    augment(x, a);
    augment(y, none, b);
    BOOST_REQUIRE(x.to_vector() == y.to_vector());
    BOOST_REQUIRE(!none.defined());
  }
  // A mask of another size is refused.
  Pair p = labelled(5, 6);
  Tensor<std::int64_t> wrong = iota<std::int64_t>({6, 5});
  BOOST_CHECK_THROW(RandomVerticalFlip()(p.image, wrong, rng), Error);
  BOOST_CHECK_THROW(Resize(3)(p.image, wrong, rng), Error);
}

BOOST_AUTO_TEST_SUITE_END()
