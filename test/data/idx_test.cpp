#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <zlib.h>

#include <ptrain/data/idx.hpp>

#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(idx_test)

namespace {

using test::Bytes;
using test::contains;
using test::error_of;
using test::test_dir;

void put32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(v >> shift));
}

// n images of rows x cols whose pixel (i, r, c) is (i * 31 + r * 7 + c * 3) mod 256.
Bytes idx_images(std::uint32_t n, std::uint32_t rows, std::uint32_t cols) {
  Bytes out;
  put32(out, 0x00000803);
  put32(out, n);
  put32(out, rows);
  put32(out, cols);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t r = 0; r < rows; ++r)
      for (std::uint32_t c = 0; c < cols; ++c)
        out.push_back(static_cast<unsigned char>((i * 31 + r * 7 + c * 3) % 256));
  return out;
}

Bytes idx_labels(const std::vector<unsigned char>& labels) {
  Bytes out;
  put32(out, 0x00000801);
  put32(out, static_cast<std::uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

fs::path write_gzip(const fs::path& path, const Bytes& bytes) {
  gzFile gz = gzopen(path.string().c_str(), "wb");
  BOOST_REQUIRE(gz != nullptr);
  BOOST_REQUIRE(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())) ==
                static_cast<int>(bytes.size()));
  BOOST_REQUIRE(gzclose(gz) == Z_OK);
  return path;
}

void check_images(const Tensor<float>& images, std::int64_t n, std::int64_t rows, std::int64_t cols) {
  BOOST_TEST(images.shape() == (Shape{n, 1, rows, cols}));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const float expected = static_cast<float>((i * 31 + r * 7 + c * 3) % 256) / 255.0f;
        BOOST_TEST(images[(i * rows + r) * cols + c] == expected);
      }
}

}  // namespace

BOOST_AUTO_TEST_CASE(plain_images_read_back_scaled_to_unit_range) {
  const auto path = test::write_bytes(test_dir() / "plain-images-idx3-ubyte", idx_images(5, 3, 4));
  const auto images = read_idx_images(path);
  check_images(images, 5, 3, 4);
  BOOST_TEST(images.array().minCoeff() >= 0.0f);
  BOOST_TEST(images.array().maxCoeff() <= 1.0f);
}

BOOST_AUTO_TEST_CASE(gzip_images_read_back_like_plain_ones) {
  const auto path = write_gzip(test_dir() / "gz-images-idx3-ubyte.gz", idx_images(9, 28, 28));
  check_images(read_idx_images(path), 9, 28, 28);
  // Detection is by the gzip magic bytes, not the name.
  const auto unnamed = write_gzip(test_dir() / "gz-without-suffix", idx_images(2, 5, 7));
  check_images(read_idx_images(unnamed), 2, 5, 7);
}

BOOST_AUTO_TEST_CASE(pixel_extremes_map_to_zero_and_one) {
  Bytes bytes;
  put32(bytes, 0x00000803);
  put32(bytes, 1);
  put32(bytes, 1);
  put32(bytes, 3);
  bytes.insert(bytes.end(), {0, 128, 255});
  const auto images = read_idx_images(test::write_bytes(test_dir() / "extremes", bytes));
  BOOST_TEST(images[0] == 0.0f);
  BOOST_TEST(images[1] == 128.0f / 255.0f);
  BOOST_TEST(images[2] == 1.0f);
}

BOOST_AUTO_TEST_CASE(labels_and_dataset_read_back) {
  const auto dir = test_dir();
  const auto images = write_gzip(dir / "ds-images.gz", idx_images(4, 2, 2));
  const auto labels = test::write_bytes(dir / "ds-labels", idx_labels({3, 0, 9, 1}));
  BOOST_TEST(read_idx_labels(labels, 10) == (std::vector<std::int64_t>{3, 0, 9, 1}));
  const TensorDataset ds = read_idx_dataset(images, labels, 10);
  BOOST_TEST(ds.size() == 4);
  BOOST_TEST(ds.example_shape() == (Shape{1, 2, 2}));
  const Example e = ds.get(2);
  BOOST_TEST(e.target == 9);
  BOOST_TEST(e.input.shape() == (Shape{1, 2, 2}));
  BOOST_TEST(e.input[3] == static_cast<float>((2 * 31 + 7 + 3) % 256) / 255.0f);
}

BOOST_AUTO_TEST_CASE(wrong_magic_names_file_offset_and_expected_magic) {
  const auto dir = test_dir();
  const auto labels = write_gzip(dir / "t10k-labels-idx1-ubyte.gz", idx_labels({1, 2}));
  const auto msg = error_of([&] { read_idx_images(labels); });
  BOOST_TEST(contains(msg,
                      "t10k-labels-idx1-ubyte.gz: offset 0: expected IDX magic 0x00000803 "
                      "(unsigned byte, 3 dims), got 0x00000801 (unsigned byte, 1 dim)"),
             msg);
  const auto images = test::write_bytes(dir / "magic-images", idx_images(1, 2, 2));
  const auto msg2 = error_of([&] { read_idx_labels(images); });
  BOOST_TEST(contains(msg2, "magic-images: offset 0: expected IDX magic 0x00000801"), msg2);
  BOOST_TEST(contains(msg2, "got 0x00000803"), msg2);
  const auto text = test::write_bytes(dir / "not-idx.txt", Bytes{'h', 'e', 'l', 'l', 'o', '\n'});
  const auto msg3 = error_of([&] { read_idx_images(text); });
  BOOST_TEST(contains(msg3, "not-idx.txt: offset 0: expected IDX magic 0x00000803"), msg3);
  BOOST_TEST(contains(msg3, "(not an IDX file)"), msg3);
}

BOOST_AUTO_TEST_CASE(truncated_header_names_file_offset_and_expected_size) {
  const auto dir = test_dir();
  Bytes bytes = idx_images(1, 2, 2);
  bytes.resize(10);  // magic, the image count and half the row count
  const auto msg = error_of([&] { read_idx_images(test::write_bytes(dir / "short-header", bytes)); });
  BOOST_TEST(contains(msg, "short-header: truncated at offset 10: expected 12 bytes of header"), msg);
  BOOST_TEST(contains(msg, "got 6"), msg);
  const auto msg2 = error_of([&] { read_idx_images(write_gzip(dir / "short-magic.gz", Bytes{0, 0})); });
  BOOST_TEST(
      contains(msg2, "short-magic.gz: truncated at offset 2: expected the 4-byte IDX magic 0x00000803"),
      msg2);
  const auto msg3 = error_of([&] { read_idx_labels(test::write_bytes(dir / "empty", Bytes{})); });
  BOOST_TEST(contains(msg3, "empty: truncated at offset 0: expected the 4-byte IDX magic 0x00000801"), msg3);
}

BOOST_AUTO_TEST_CASE(truncated_data_names_file_offset_and_expected_size) {
  const auto dir = test_dir();
  Bytes bytes = idx_images(10000, 28, 28);
  bytes.resize(16 + 16000);
  for (bool gz : {false, true}) {
    const auto name = std::string("t10k-images-idx3-ubyte") + (gz ? ".gz" : "");
    const auto path = gz ? write_gzip(dir / name, bytes) : test::write_bytes(dir / name, bytes);
    const auto msg = error_of([&] { read_idx_images(path); });
    BOOST_TEST(contains(msg, name + ": truncated at offset 16016: expected 7840000 bytes of image data "
                                    "(10000 images of 28x28), got 16000"),
               msg);
  }
  Bytes labels = idx_labels({1, 2, 3, 4, 5});
  labels.pop_back();
  const auto msg = error_of([&] { read_idx_labels(test::write_bytes(dir / "short-labels", labels)); });
  BOOST_TEST(
      contains(msg, "short-labels: truncated at offset 12: expected 5 bytes of label data (5 labels), got 4"),
      msg);
}

// Headers claiming more than the file holds are refused without allocating what they claim: the
// payload buffer grows with the bytes actually read (plain and gzip alike).
BOOST_AUTO_TEST_CASE(headers_claiming_huge_counts_are_refused_without_allocating_them) {
  const auto dir = test_dir();
  Bytes labels;
  put32(labels, 0x00000801);
  put32(labels, 0x80000000u);  // 2^31 labels
  labels.insert(labels.end(), {1, 2, 3, 4});
  Bytes images;
  put32(images, 0x00000803);
  for (std::uint32_t extent : {0x80000000u, 28u, 28u}) put32(images, extent);
  images.insert(images.end(), 100, 7);
  for (bool gz : {false, true}) {
    const std::string suffix = gz ? ".gz" : "";
    const auto label_path = dir / ("claims-labels" + suffix), image_path = dir / ("claims-images" + suffix);
    gz ? write_gzip(label_path, labels) : test::write_bytes(label_path, labels);
    gz ? write_gzip(image_path, images) : test::write_bytes(image_path, images);
    auto msg = error_of([&] { read_idx_labels(label_path); });
    BOOST_TEST(contains(msg, label_path.string() + ": truncated at offset 12: expected 2147483648 bytes of label data "
                                                   "(2147483648 labels), got 4"),
               msg);
    msg = error_of([&] { read_idx_images(image_path); });
    BOOST_TEST(contains(msg, image_path.string() + ": truncated at offset 116: expected 1683627180032 bytes of image "
                                                   "data (2147483648 images of 28x28), got 100"),
               msg);
  }
  Bytes endless;
  put32(endless, 0x00000803);
  for (int d = 0; d < 3; ++d) put32(endless, 0xffffffffu);
  const auto msg = error_of([&] { read_idx_images(test::write_bytes(dir / "endless", endless)); });
  BOOST_TEST(contains(msg, "endless: offset 4: expected extents whose product fits in memory, got 4294967295 x "
                           "4294967295 x 4294967295"),
             msg);
}

BOOST_AUTO_TEST_CASE(zero_image_extent_is_an_error) {
  const auto msg =
      error_of([&] { read_idx_images(test::write_bytes(test_dir() / "zero-cols", idx_images(2, 3, 0))); });
  BOOST_TEST(contains(msg, "zero-cols: offset 12: expected positive image extents, got 3 x 0"), msg);
}

BOOST_AUTO_TEST_CASE(cut_gzip_stream_is_reported_as_truncated) {
  const auto dir = test_dir();
  const auto full = write_gzip(dir / "cut-full.gz", idx_images(50, 28, 28));
  std::ifstream in(full, std::ios::binary);
  Bytes compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  compressed.resize(compressed.size() / 2);
  const auto msg = error_of([&] { read_idx_images(test::write_bytes(dir / "cut.gz", compressed)); });
  BOOST_TEST(contains(msg, "cut.gz: "), msg);
  BOOST_TEST((contains(msg, "truncated at offset") || contains(msg, "corrupt gzip")), msg);
  BOOST_TEST(contains(msg, "expected 39200 bytes of image data"), msg);
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_an_error) {
  Bytes bytes = idx_labels({1, 2});
  bytes.push_back(7);
  const auto msg = error_of([&] { read_idx_labels(test::write_bytes(test_dir() / "long-labels", bytes)); });
  BOOST_TEST(contains(msg, "long-labels: offset 10: expected the end of the file after 2 labels"), msg);
}

BOOST_AUTO_TEST_CASE(label_count_mismatch_names_both_files) {
  const auto dir = test_dir();
  const auto images = test::write_bytes(dir / "mismatch-images", idx_images(3, 2, 2));
  const auto labels = write_gzip(dir / "mismatch-labels.gz", idx_labels({1, 2}));
  const auto msg = error_of([&] { read_idx_dataset(images, labels, 10); });
  BOOST_TEST(contains(msg, "mismatch-labels.gz: offset 4: expected 3 labels (the image count of "), msg);
  BOOST_TEST(contains(msg, "mismatch-images), got 2"), msg);
}

BOOST_AUTO_TEST_CASE(label_out_of_range_names_offset_and_range) {
  const auto path = test::write_bytes(test_dir() / "range-labels", idx_labels({0, 9, 12, 3}));
  const auto msg = error_of([&] { read_idx_labels(path, 10); });
  BOOST_TEST(contains(msg, "range-labels: offset 10: label 12 out of range: expected 0..9"), msg);
  BOOST_TEST(read_idx_labels(path, 13).at(2) == 12);
}

BOOST_AUTO_TEST_CASE(missing_file_is_named) {
  const auto msg = error_of([&] { read_idx_images(test_dir() / "does-not-exist"); });
  BOOST_TEST(contains(msg, "does-not-exist: cannot open"), msg);
}

BOOST_AUTO_TEST_CASE(mnist_layout_under_any_root) {
  const auto root = test_dir() / "mnist-root";
  fs::create_directories(root);
  write_gzip(root / "t10k-images-idx3-ubyte.gz", idx_images(3, 28, 28));
  write_gzip(root / "t10k-labels-idx1-ubyte.gz", idx_labels({4, 5, 6}));
  test::write_bytes(root / "train-images-idx3-ubyte", idx_images(2, 28, 28));
  test::write_bytes(root / "train-labels-idx1-ubyte", idx_labels({7, 8}));
  const FashionMnist test(Split::test, root);
  BOOST_TEST(test.size() == 3);
  BOOST_TEST(test.get(1).target == 5);
  const Mnist train(Split::train, root);
  BOOST_TEST(train.size() == 2);
  BOOST_TEST(train.inputs().shape() == (Shape{2, 1, 28, 28}));
  BOOST_TEST(train.get(1).target == 8);
  const auto msg = error_of([&] { FashionMnist(Split::train, root / "nowhere"); });
  BOOST_TEST(contains(msg, "FashionMnist: found neither "), msg);
  BOOST_TEST(contains(msg, "nowhere/train-images-idx3-ubyte.gz"), msg);
}

BOOST_AUTO_TEST_CASE(real_fashion_mnist_test_set) {
  const fs::path root = FashionMnist::default_root;
  BOOST_REQUIRE_MESSAGE(
      fs::exists(root / "t10k-images-idx3-ubyte.gz") && fs::exists(root / "t10k-labels-idx1-ubyte.gz"),
      "Fashion-MNIST is missing: expected " << root.string()
                                            << "/t10k-{images-idx3,labels-idx1}-ubyte.gz "
                                               "(Debian package dataset-fashion-mnist)");
  const FashionMnist test(Split::test);
  BOOST_TEST(test.size() == 10000);
  BOOST_TEST(test.inputs().shape() == (Shape{10000, 1, 28, 28}));
  const auto& labels = test.targets();
  BOOST_TEST(std::vector<std::int64_t>(labels.begin(), labels.begin() + 10) ==
             (std::vector<std::int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  std::vector<int> per_class(10, 0);
  for (auto l : labels) {
    BOOST_REQUIRE(l >= 0 && l < 10);
    ++per_class[static_cast<std::size_t>(l)];
  }
  BOOST_TEST(per_class == std::vector<int>(10, 1000), boost::test_tools::per_element());
  // Reference values from the file's bytes (computed once with Python's gzip module).
  const Example first = test.get(0);
  BOOST_TEST(first.input.array().sum() == 33456.0 / 255.0, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(first.input.array().maxCoeff() == 1.0f);
  const std::vector<int> row14 = {0,   0,   0,   0,   0,   0,   2,   4,   1,   0,   0,   0,   98,  136,
                                  110, 109, 110, 162, 135, 144, 149, 159, 167, 144, 158, 169, 119, 0};
  for (std::size_t c = 0; c < 28; ++c)
    BOOST_TEST(first.input[static_cast<std::int64_t>(14 * 28 + c)] == static_cast<float>(row14[c]) / 255.0f);
  BOOST_TEST(test.inputs().array().cast<double>().sum() == 573469082.0 / 255.0,
             boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_SUITE_END()
