#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/data/image_folder.hpp>
#include <ptrain/data/loader.hpp>

#include "../common/files.hpp"
#include "../common/images.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
using test::contains;
using test::error_of;

BOOST_AUTO_TEST_SUITE(image_folder_test)

namespace {

const fs::path& dir() { return test::temp_dir("image_folder_test"); }

// Classes named so that sorting matters (upper case sorts first, as in Python), images of several
// sizes and formats, a nested folder and a file that is not an image.
fs::path write_tree(const fs::path& root) {
  io::write_png(root / "cat" / "b.png", test::pattern_image(5, 6, 3, 1));
  io::write_png(root / "cat" / "a.PNG", test::pattern_image(4, 4, 1, 2));  // gray: read as RGB
  io::write_png(root / "cat" / "sub" / "c.png", test::pattern_image(3, 3, 4, 3));
  io::write_jpeg(root / "ant" / "x.jpg", test::gradient_image(16, 16, 4));
  io::write_jpeg(root / "ant" / "y.jpeg", test::gradient_image(8, 12, 5));
  io::write_png(root / "Dog" / "z.png", test::pattern_image(2, 7, 3, 6));
  test::write_bytes(root / "Dog" / "notes.txt", std::vector<char>{'h', 'i'});
  test::write_bytes(root / "README", std::vector<char>{'x'});  // a file beside the classes
  return root;
}

const fs::path& tree() {
  static const fs::path root = write_tree(dir() / "tree");
  return root;
}

std::vector<std::string> relative(const ImageFolder& data) {
  std::vector<std::string> names;
  for (const auto& f : data.files()) names.push_back(fs::relative(f, data.root()).string());
  return names;
}

}  // namespace

BOOST_AUTO_TEST_CASE(classes_sorted_by_name_and_files_by_path) {
  const ImageFolder data(tree());
  BOOST_TEST(data.class_names() == (std::vector<std::string>{"Dog", "ant", "cat"}), boost::test_tools::per_element());
  BOOST_TEST(data.size() == 6);
  BOOST_TEST(relative(data) == (std::vector<std::string>{"Dog/z.png", "ant/x.jpg", "ant/y.jpeg", "cat/a.PNG",
                                                         "cat/b.png", "cat/sub/c.png"}),
             boost::test_tools::per_element());
  BOOST_TEST(data.targets() == (std::vector<std::int64_t>{0, 1, 1, 2, 2, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(examples_are_rgb_chw_in_unit_range) {
  const ImageFolder data(tree());
  // cat/b.png, exact.
  const Example b = data.get(4);
  BOOST_TEST(b.target == 2);
  BOOST_REQUIRE(b.input.shape() == (Shape{3, 5, 6}));
  const io::Image png = test::pattern_image(5, 6, 3, 1);
  for (std::int64_t k = 0; k < 3; ++k)
    for (std::int64_t y = 0; y < 5; ++y)
      for (std::int64_t x = 0; x < 6; ++x)
        BOOST_TEST(b.input[(k * 5 + y) * 6 + x] == static_cast<float>(png.at(y, x, k)) / 255.0f);
  // The gray PNG has its value in every channel; the RGBA one drops alpha.
  const Example a = data.get(3);
  BOOST_REQUIRE(a.input.shape() == (Shape{3, 4, 4}));
  BOOST_TEST(a.input[0] == a.input[16]);
  BOOST_TEST(a.input[5] == static_cast<float>(test::pattern_image(4, 4, 1, 2).at(1, 1, 0)) / 255.0f);
  BOOST_TEST(data.get(5).input.shape() == (Shape{3, 3, 3}));
  // ant/x.jpg, within JPEG's error.
  const Example x = data.get(1);
  BOOST_REQUIRE(x.input.shape() == (Shape{3, 16, 16}));
  const io::Image jpeg = test::gradient_image(16, 16, 4);
  float worst = 0;
  for (std::int64_t k = 0; k < 3; ++k)
    for (std::int64_t i = 0; i < 256; ++i)
      worst = std::max(worst, std::abs(x.input[k * 256 + i] -
                                       static_cast<float>(jpeg.pixels[static_cast<std::size_t>(i * 3 + k)]) / 255.0f));
  BOOST_TEST(worst < 12.0f / 255.0f);
  // Gray mode: one channel.
  BOOST_TEST(ImageFolder(tree(), io::ColorMode::gray).get(0).input.shape() == (Shape{1, 2, 7}));
}

BOOST_AUTO_TEST_CASE(a_resize_in_the_loader_batches_images_of_any_size) {
  DataLoader loader(ImageFolder(tree()), {.batch_size = 4, .num_workers = 2}, Resize(8, 8));
  std::int64_t seen = 0;
  for (const Batch& batch : loader) {
    BOOST_TEST(batch.inputs.shape() == (Shape{batch.size(), 3, 8, 8}));
    BOOST_TEST(batch.target_shape == (Shape{batch.size()}));
    seen += batch.size();
  }
  BOOST_TEST(seen == 6);
}

BOOST_AUTO_TEST_CASE(train_and_validation_folders_are_two_image_folders) {
  const fs::path root = dir() / "vggf";
  for (const char* split : {"TrainData", "ValidationData"})
    for (const char* cls : {"real", "fake"}) io::write_png(root / split / cls / "0.png", test::pattern_image(4, 4, 3));
  io::write_png(root / "TrainData" / "fake" / "1.png", test::pattern_image(4, 4, 3));
  const ImageFolder train(root / "TrainData"), validation(root / "ValidationData");
  BOOST_TEST(train.class_names() == validation.class_names(), boost::test_tools::per_element());
  BOOST_TEST(train.class_names() == (std::vector<std::string>{"fake", "real"}), boost::test_tools::per_element());
  BOOST_TEST(train.size() == 3);
  BOOST_TEST(validation.size() == 2);
}

BOOST_AUTO_TEST_CASE(bad_trees_and_corrupt_images_are_errors_naming_the_path) {
  const fs::path root = dir() / "bad";
  io::write_png(root / "full" / "0.png", test::pattern_image(4, 4, 3));
  fs::create_directories(root / "empty");
  test::write_bytes(root / "empty" / "notes.txt", std::vector<char>{'x'});
  std::string message = error_of([&] { ImageFolder data(root); });
  BOOST_TEST(contains(message, (root / "empty").string() + " holds no .png, .jpg or .jpeg file"), message);
  BOOST_TEST(contains(message, "class 'empty'"), message);
  message = error_of([&] { ImageFolder data(root / "absent"); });
  BOOST_TEST(contains(message, (root / "absent").string() + " is not a directory"), message);
  message = error_of([&] { ImageFolder data(root / "full"); });
  BOOST_TEST(contains(message, (root / "full").string() + " has no class folders"), message);

  fs::remove_all(root / "empty");
  const auto png = io::encode_png(test::pattern_image(8, 8, 3));
  const fs::path corrupt =
      test::write_bytes(root / "full" / "1.png", std::vector<std::uint8_t>(png.begin(), png.begin() + png.size() / 2));
  const ImageFolder data(root);
  message = error_of([&] { data.get(1); });
  BOOST_TEST(contains(message, corrupt.string() + ": corrupt PNG"), message);
}

BOOST_AUTO_TEST_SUITE_END()
