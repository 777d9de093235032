#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/data/image_mask.hpp>
#include <ptrain/data/loader.hpp>

#include "../common/files.hpp"
#include "../common/images.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
using test::contains;
using test::error_of;
BOOST_AUTO_TEST_SUITE(image_mask_test)

using Labels = std::vector<std::int64_t>;
using Bytes = std::vector<std::uint8_t>;

namespace {

const fs::path& dir() { return test::temp_dir("image_mask_test"); }

io::Image gray(std::int64_t h, std::int64_t w, const Bytes& values) {
  io::Image image(h, w, 1);
  image.pixels = values;
  return image;
}

// images/a.png with a palette mask (classes 0..2), images/b.jpg with a gray class-index mask.
fs::path write_pairs(const fs::path& root, const std::string& suffix = "") {
  io::write_png(root / "images" / "a.png", test::pattern_image(2, 3, 3));
  io::write_jpeg(root / "images" / "b.jpg", test::gradient_image(2, 3));
  const std::vector<png_color> palette = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}};
  // 8-bit palette indices, rows 0 1 2 / 2 1 0.
  test::write_bytes(root / "masks" / ("a" + suffix + ".png"),
                    test::raw_png(3, 2, 8, PNG_COLOR_TYPE_PALETTE, {{0, 1, 2}, {2, 1, 0}}, palette));
  io::write_png(root / "masks" / ("b" + suffix + ".png"), gray(2, 3, {1, 1, 0, 0, 2, 2}));
  return root;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pairs_matched_by_stem_with_class_index_masks) {
  const fs::path root = write_pairs(dir() / "pairs");
  const ImageMaskFolder data(root / "images", root / "masks", {.num_classes = 3});
  BOOST_TEST(data.size() == 2);
  BOOST_TEST(data.masks()[1] == root / "masks" / "b.png");
  const Example a = data.get(0);
  BOOST_TEST(a.input.shape() == (Shape{3, 2, 3}));
  BOOST_REQUIRE(a.target_map.shape() == (Shape{2, 3}));
  BOOST_TEST(a.target_map.to_vector() == (Labels{0, 1, 2, 2, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(data.get(1).target_map.to_vector() == (Labels{1, 1, 0, 0, 2, 2}), boost::test_tools::per_element());
  // A class index at or above num_classes is refused, naming the mask and the pixel.
  const ImageMaskFolder two(root / "images", root / "masks", {.num_classes = 2});
  const std::string message = error_of([&] { two.get(0); });
  BOOST_TEST(contains(message, (root / "masks" / "a.png").string() + ": value 2 at row 0, column 2"), message);
  BOOST_TEST(contains(message, "expected a class index below 2"), message);
}

BOOST_AUTO_TEST_CASE(binary_masks_map_255_to_one) {
  const fs::path root = dir() / "binary";
  io::write_png(root / "images" / "car.png", test::pattern_image(2, 2, 3));
  io::write_png(root / "masks" / "car_mask.png", gray(2, 2, {0, 255, 255, 0}));
  const ImageMaskFolder data(root / "images", root / "masks",
                             {.values = MaskValues::binary_255, .mask_suffix = "_mask"});
  BOOST_TEST(data.get(0).target_map.to_vector() == (Labels{0, 1, 1, 0}), boost::test_tools::per_element());
  // As class indices the same mask keeps its values.
  BOOST_TEST(ImageMaskFolder(root / "images", root / "masks", {.mask_suffix = "_mask"}).get(0).target_map[1] == 255);
  io::write_png(root / "masks" / "car_mask.png", gray(2, 2, {0, 255, 7, 0}));
  const std::string message = error_of([&] { data.get(0); });
  BOOST_TEST(contains(message, (root / "masks" / "car_mask.png").string() + ": value 7 at row 1, column 0"), message);
  BOOST_TEST(contains(message, "expected 0 or 255 (a binary mask)"), message);
}

BOOST_AUTO_TEST_CASE(mask_of_another_size_names_both_files_and_sizes) {
  const fs::path root = write_pairs(dir() / "mismatch");
  io::write_png(root / "masks" / "b.png", gray(3, 2, {0, 0, 0, 0, 0, 0}));
  const ImageMaskFolder data(root / "images", root / "masks");
  const std::string message = error_of([&] { data.get(1); });
  BOOST_TEST(contains(message, "mask " + (root / "masks" / "b.png").string() + " is 2x3 but its image " +
                                   (root / "images" / "b.jpg").string() + " is 3x2 (width x height)"),
             message);
  BOOST_TEST(contains(message, "expected the mask to have its image's size"), message);
}

BOOST_AUTO_TEST_CASE(an_image_without_its_mask_is_an_error) {
  const fs::path root = write_pairs(dir() / "unmatched");
  fs::remove(root / "masks" / "b.png");
  const std::string message = error_of([&] { ImageMaskFolder data(root / "images", root / "masks"); });
  BOOST_TEST(contains(message, "image " + (root / "images" / "b.jpg").string() + " has no mask: expected " +
                                   (root / "masks" / "b").string()),
             message);
}

BOOST_AUTO_TEST_CASE(loader_batches_target_maps_through_paired_transforms) {
  const fs::path root = write_pairs(dir() / "loader");
  const ImageMaskFolder data(root / "images", root / "masks");
  DataLoader loader(data, {.batch_size = 2, .seed = 3},
                    Compose{Resize(4, 4), RandomHorizontalFlip(), RandomRotation90()});
  const Batch batch = *loader.next();
  BOOST_TEST(batch.size() == 2);
  const std::int64_t h = batch.inputs.size(2), w = batch.inputs.size(3);
  BOOST_TEST((h == 4 && w == 4));
  BOOST_TEST(batch.target_shape == (Shape{2, h, w}));
  BOOST_REQUIRE(batch.targets.size() == 32u);
  // Each mask went through what its image went through: nearest-resized, then flipped and turned
  // by the same draws; redo example 0's draws (batch 0 of epoch 0 draws from mix_seed(seed, 0, 1)).
  Tensor<float> x = data.get(0).input;
  Tensor<std::int64_t> map = data.get(0).target_map.clone();
  Rng rng(detail::mix_seed(3, 0, 1));
  Compose{Resize(4, 4), RandomHorizontalFlip(), RandomRotation90()}(x, map, rng);
  BOOST_TEST(Labels(batch.targets.begin(), batch.targets.begin() + 16) == map.to_vector(),
             boost::test_tools::per_element());
  // The dataset's masks are untouched.
  BOOST_TEST(data.get(0).target_map.to_vector() == (Labels{0, 1, 2, 2, 1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
