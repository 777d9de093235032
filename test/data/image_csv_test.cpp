#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/image_csv.hpp>

#include "../common/files.hpp"
#include "../common/images.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
using test::contains;
using test::error_of;
BOOST_AUTO_TEST_SUITE(image_csv_test)

using Labels = std::vector<std::int64_t>;

namespace {

const fs::path& dir() { return test::temp_dir("image_csv_test"); }

fs::path write_text(const fs::path& path, const std::string& text) {
  return test::write_bytes(path, std::vector<char>(text.begin(), text.end()));
}

// Kaggle's diabetic-retinopathy layout: trainLabels.csv (image,level) and train/<image>.jpeg.
fs::path write_retinopathy(const fs::path& root) {
  const char* names[] = {"10_left", "10_right", "13_left", "15_left"};
  for (int i = 0; i < 4; ++i)
    io::write_jpeg(root / "train" / (std::string(names[i]) + ".jpeg"), test::gradient_image(12, 10, i));
  return write_text(root / "trainLabels.csv", "image,level\n10_left,0\n10_right,0\n13_left,4\n15_left,1\n");
}

}  // namespace

BOOST_AUTO_TEST_CASE(rows_in_file_order_with_their_labels) {
  const fs::path root = dir() / "kaggle";
  const ImageCsv data(write_retinopathy(root), root / "train");
  BOOST_TEST(data.size() == 4);
  BOOST_TEST(data.targets() == (Labels{0, 0, 4, 1}), boost::test_tools::per_element());
  BOOST_TEST(data.files()[2] == root / "train" / "13_left.jpeg");
  const Example e = data.get(2);
  BOOST_TEST(e.target == 4);
  BOOST_TEST(e.input.shape() == (Shape{3, 12, 10}));
  // The pixels are the JPEG's, within its error.
  const io::Image original = test::gradient_image(12, 10, 2);
  BOOST_TEST(std::abs(e.input[0] - static_cast<float>(original.at(0, 0, 0)) / 255.0f) < 8.0f / 255.0f);
}

// A triplet's instrument, verb and target: the labels as the example's target map [3], in the
// order the options name the columns; an image path relative to the image directory.
BOOST_AUTO_TEST_CASE(several_label_columns_give_a_label_vector) {
  const fs::path root = dir() / "triplet";
  io::write_png(root / "img" / "v1" / "a.png", test::pattern_image(4, 4, 3));
  io::write_png(root / "img" / "v1" / "b.png", test::pattern_image(4, 4, 1));
  const fs::path csv = write_text(root / "triplets.csv", "path,target,instrument,verb\nv1/a.png,14,5,9\nv1/b.png,0,1,2\n");
  const ImageCsv data(csv, root / "img",
                      {.image_column = "path", .label_columns = {"instrument", "verb", "target"}, .extension = ""});
  BOOST_TEST(data.label_count() == 3);
  BOOST_TEST(data.targets() == (Labels{5, 9, 14, 1, 2, 0}), boost::test_tools::per_element());
  const Example e = data.get(0);
  BOOST_TEST(e.target_map.shape() == (Shape{3}));
  BOOST_TEST(e.target_map.to_vector() == (Labels{5, 9, 14}), boost::test_tools::per_element());
  const std::string message = error_of([&] {
    ImageCsv bad(write_text(root / "bad.csv", "path,instrument,verb,target\nv1/a.png,1,x,2\n"), root / "img",
                 {.image_column = "path", .label_columns = {"instrument", "verb", "target"}, .extension = ""});
  });
  BOOST_TEST(contains(message, "bad.csv: row 1 (line 2): column 'verb' holds 'x': expected a non-negative integer class"),
             message);
}

BOOST_AUTO_TEST_CASE(columns_and_extension_are_configurable) {
  const fs::path root = dir() / "custom";
  io::write_png(root / "img" / "a b.png", test::pattern_image(3, 3, 3));
  io::write_png(root / "img" / "c,d.png", test::pattern_image(3, 3, 1));
  // A byte-order mark, other column order, a quoted name with a comma, CRLF line ends and a blank
  // last line.
  const fs::path csv = write_text(root / "labels.csv",
                                  "\xEF\xBB\xBF"
                                  "diagnosis,extra,id\r\n2,x,a b\r\n7,\"y \"\"q\"\"\",\"c,d\"\r\n\r\n");
  const ImageCsv data(
      csv, root / "img",
      {.image_column = "id", .label_column = "diagnosis", .extension = ".png", .mode = io::ColorMode::gray});
  BOOST_TEST(data.targets() == (Labels{2, 7}), boost::test_tools::per_element());
  BOOST_TEST(data.files()[1] == root / "img" / "c,d.png");
  BOOST_TEST(data.get(0).input.shape() == (Shape{1, 3, 3}));
}

BOOST_AUTO_TEST_CASE(a_row_naming_a_missing_image_is_an_error) {
  const fs::path root = dir() / "missing";
  write_retinopathy(root);
  fs::remove(root / "train" / "13_left.jpeg");
  const std::string message = error_of([&] { ImageCsv data(root / "trainLabels.csv", root / "train"); });
  BOOST_TEST(contains(message, (root / "trainLabels.csv").string() + ": row 3 (line 4): image '13_left' is missing"),
             message);
  BOOST_TEST(contains(message, "expected " + (root / "train" / "13_left.jpeg").string()), message);
}

BOOST_AUTO_TEST_CASE(bad_headers_and_fields_are_errors) {
  const fs::path root = dir() / "bad";
  write_retinopathy(root);
  const fs::path csv = root / "trainLabels.csv";
  std::string message = error_of([&] { ImageCsv data(csv, root / "train", {.label_column = "grade"}); });
  BOOST_TEST(contains(message, csv.string() + ": line 1: expected a column 'grade' in the header, found: image,level"),
             message);
  write_text(csv, "image,level\n10_left,0\n10_right,severe\n");
  message = error_of([&] { ImageCsv data(csv, root / "train"); });
  BOOST_TEST(contains(message, csv.string() + ": row 2 (line 3): column 'level' holds 'severe'"), message);
  write_text(csv, "image,level\n10_left\n");
  message = error_of([&] { ImageCsv data(csv, root / "train"); });
  BOOST_TEST(contains(message, csv.string() + ": row 1 (line 2): expected 2 fields as the header, found 1"), message);
  write_text(csv, "");
  message = error_of([&] { ImageCsv data(csv, root / "train"); });
  BOOST_TEST(contains(message, csv.string() + ": empty: expected a header line"), message);
  write_text(csv, "image,level\n\n");
  message = error_of([&] { ImageCsv data(csv, root / "train"); });
  BOOST_TEST(contains(message, csv.string() + ": no rows after the header: expected one line per image"), message);
}

BOOST_AUTO_TEST_SUITE_END()
