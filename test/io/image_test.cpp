#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/io/image.hpp>
#include <zlib.h>

#include "../common/files.hpp"
#include "../common/images.hpp"

using namespace ptrain;
using namespace ptrain::io;
namespace fs = std::filesystem;
BOOST_AUTO_TEST_SUITE(image_test)

using Bytes = std::vector<std::uint8_t>;
using test::contains;
using test::error_of;
using test::raw_png;
using test::write_bytes;

namespace {

const fs::path& dir() { return test::temp_dir("image_test"); }

Image pattern(std::int64_t h, std::int64_t w, std::int64_t c) { return test::pattern_image(h, w, c); }
Image gradient(std::int64_t h, std::int64_t w) { return test::gradient_image(h, w); }

void put32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}
void put_chunk(Bytes& out, const char* type, const Bytes& data) {
  put32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put32(out, static_cast<std::uint32_t>(crc32(0, out.data() + start, static_cast<uInt>(out.size() - start))));
}
// A well-formed PNG start whose IHDR claims width x height 8-bit pixels of a colour type, `padding`
// bytes of a private ancillary chunk (which decoders skip), and a little image data.
Bytes png_claiming(std::uint32_t width, std::uint32_t height, std::uint8_t color_type, std::size_t padding = 0) {
  Bytes out{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  Bytes header;
  put32(header, width);
  put32(header, height);
  header.insert(header.end(), {8, color_type, 0, 0, 0});
  put_chunk(out, "IHDR", header);
  if (padding) put_chunk(out, "prVt", Bytes(padding, 0));
  put_chunk(out, "IDAT", Bytes{0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01});
  put_chunk(out, "IEND", {});
  return out;
}
// An encoded baseline JPEG with its frame header (SOF0: ff c0, length, precision, height, width)
// claiming another size.
Bytes jpeg_claiming(std::uint16_t width, std::uint16_t height) {
  Bytes bytes = encode_jpeg(gradient(16, 16), 90);
  for (std::size_t i = 0; i + 9 < bytes.size(); ++i)
    if (bytes[i] == 0xff && bytes[i + 1] == 0xc0) {
      bytes[i + 5] = static_cast<std::uint8_t>(height >> 8);
      bytes[i + 6] = static_cast<std::uint8_t>(height);
      bytes[i + 7] = static_cast<std::uint8_t>(width >> 8);
      bytes[i + 8] = static_cast<std::uint8_t>(width);
      return bytes;
    }
  BOOST_FAIL("no SOF0 marker in the encoded JPEG");
  return bytes;
}

}  // namespace

// A header claiming a huge image is refused before its pixels are allocated (it ended in
// std::bad_alloc): beyond io::max_image_pixels, or beyond what the file's bytes can hold.
BOOST_AUTO_TEST_CASE(png_claiming_a_huge_image_is_refused_before_allocating) {
  const fs::path huge = write_bytes(dir() / "huge.png", png_claiming(100000, 100000, 2));
  std::string message = error_of([&] { read_image(huge); });
  BOOST_TEST(contains(message, huge.string() + ": the header claims 100000x100000 pixels of 3 channels, more than "
                                               "io::max_image_pixels (178956970, PIL's DecompressionBombError limit)"),
             message);
  const Bytes small_file = png_claiming(10000, 10000, 0);
  const fs::path big = write_bytes(dir() / "big.png", small_file);
  message = error_of([&] { read_image_tensor(big); });
  BOOST_TEST(contains(message, big.string() + ": the header claims 10000x10000 pixels of 1 channel, 100000000 bytes "
                                              "of image data, but a " + std::to_string(small_file.size()) +
                                              "-byte file holds at most " + std::to_string(small_file.size() * 1032) +
                                              " (deflate expands a byte to at most 1032)"),
             message);
  // With enough bytes for its claim the same header is decoded, and fails on its short data.
  const fs::path padded = write_bytes(dir() / "padded.png", png_claiming(300, 300, 0, 200));
  message = error_of([&] { read_image(padded); });
  BOOST_TEST(contains(message, padded.string() + ": corrupt PNG"), message);
}

BOOST_AUTO_TEST_CASE(jpeg_claiming_a_huge_image_is_refused_before_allocating) {
  const fs::path huge = write_bytes(dir() / "huge.jpg", jpeg_claiming(60000, 60000));
  std::string message = error_of([&] { read_image(huge); });
  BOOST_TEST(contains(message, huge.string() + ": the header claims 60000x60000 pixels of 3 channels, more than "
                                               "io::max_image_pixels"),
             message);
  const Bytes small_file = jpeg_claiming(5000, 4000);
  const fs::path big = write_bytes(dir() / "big.jpg", small_file);
  message = error_of([&] { read_image(big); });
  BOOST_TEST(contains(message, big.string() + ": the header claims 5000x4000 pixels of 3 channels, 60000000 bytes of "
                                              "image data, but a " + std::to_string(small_file.size()) +
                                              "-byte file holds at most " + std::to_string(small_file.size() * 768) +
                                              " (a sequential JPEG codes at most 256 pixels per byte)"),
             message);
}

BOOST_AUTO_TEST_CASE(png_round_trips_exactly_for_one_to_four_channels) {
  for (std::int64_t c = 1; c <= 4; ++c) {
    const Image image = pattern(9, 13, c);
    const fs::path path = dir() / ("pattern" + std::to_string(c) + ".png");
    write_png(path, image);
    const Image back = read_image(path);
    BOOST_TEST(back.channels == c);
    BOOST_TEST(back.height == 9);
    BOOST_TEST(back.width == 13);
    BOOST_TEST(back.pixels == image.pixels, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(tensor_is_chw_in_unit_range) {
  const Image image = pattern(2, 3, 3);
  write_png(dir() / "small.png", image);
  const Tensor<float> t = read_image_tensor(dir() / "small.png");
  BOOST_REQUIRE(t.shape() == (Shape{3, 2, 3}));
  for (std::int64_t k = 0; k < 3; ++k)
    for (std::int64_t y = 0; y < 2; ++y)
      for (std::int64_t x = 0; x < 3; ++x)
        BOOST_TEST(t[(k * 2 + y) * 3 + x] == static_cast<float>(image.at(y, x, k)) / 255.0f);
  BOOST_TEST(to_image(t).pixels == image.pixels, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(color_modes_convert_as_pil) {
  Image rgba(1, 3, 4);
  rgba.pixels = {255, 0, 0, 10, 0, 255, 0, 20, 10, 20, 30, 255};
  const Image gray = convert_color(rgba, ColorMode::gray);
  // PIL's L = (19595 R + 38470 G + 7471 B + 32768) >> 16.
  BOOST_TEST(gray.pixels == (Bytes{76, 150, 18}), boost::test_tools::per_element());
  const Image rgb = convert_color(rgba, ColorMode::rgb);
  BOOST_TEST(rgb.pixels == (Bytes{255, 0, 0, 0, 255, 0, 10, 20, 30}), boost::test_tools::per_element());
  Image gray_alpha(1, 2, 2);
  gray_alpha.pixels = {7, 0, 200, 255};
  BOOST_TEST(convert_color(gray_alpha, ColorMode::rgb).pixels == (Bytes{7, 7, 7, 200, 200, 200}),
             boost::test_tools::per_element());
  BOOST_TEST(convert_color(gray_alpha, ColorMode::gray).pixels == (Bytes{7, 200}), boost::test_tools::per_element());
  write_png(dir() / "rgba.png", rgba);
  BOOST_TEST(read_image(dir() / "rgba.png", ColorMode::gray).pixels == gray.pixels, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(palette_and_other_bit_depths_decode_to_8_bits) {
  // 2-bit palette of three colours, the last half transparent; indices per row 0 1 2 1 / 2 2 0 0.
  const std::vector<png_color> palette = {{10, 20, 30}, {200, 100, 0}, {0, 0, 255}};
  const std::vector<Bytes> rows = {{0b00011001}, {0b10100000}};
  write_bytes(dir() / "palette.png", raw_png(4, 2, 2, PNG_COLOR_TYPE_PALETTE, rows, palette));
  const Image rgb = read_image(dir() / "palette.png");
  BOOST_REQUIRE(rgb.channels == 3);
  BOOST_TEST(rgb.pixels == (Bytes{10, 20, 30,  200, 100, 0,   0,  0,  255, 200, 100, 0,  //
                                  0,  0,  255, 0,   0,   255, 10, 20, 30,  10,  20,  30}),
             boost::test_tools::per_element());
  const Image indices = read_index_image(dir() / "palette.png");
  BOOST_REQUIRE(indices.channels == 1);
  BOOST_TEST(indices.pixels == (Bytes{0, 1, 2, 1, 2, 2, 0, 0}), boost::test_tools::per_element());
  // tRNS on a palette becomes alpha.
  write_bytes(dir() / "palette_alpha.png", raw_png(4, 2, 2, PNG_COLOR_TYPE_PALETTE, rows, palette, {255, 255, 128}));
  const Image rgba = read_image(dir() / "palette_alpha.png");
  BOOST_REQUIRE(rgba.channels == 4);
  BOOST_TEST(rgba.at(0, 2, 3) == 128);
  BOOST_TEST(rgba.at(0, 1, 3) == 255);
  // 1-bit gray widens 0/1 to 0/255; 16-bit gray keeps the high byte.
  write_bytes(dir() / "bits.png", raw_png(8, 1, 1, PNG_COLOR_TYPE_GRAY, {{0b10110001}}));
  BOOST_TEST(read_image(dir() / "bits.png").pixels == (Bytes{255, 0, 255, 255, 0, 0, 0, 255}),
             boost::test_tools::per_element());
  write_bytes(dir() / "deep.png", raw_png(2, 1, 16, PNG_COLOR_TYPE_GRAY, {{0x12, 0x34, 0xff, 0x01}}));
  BOOST_TEST(read_image(dir() / "deep.png").pixels == (Bytes{0x12, 0xff}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(index_image_of_colour_is_an_error) {
  Image image(2, 2, 3);
  std::fill(image.pixels.begin(), image.pixels.end(), 9);
  write_png(dir() / "gray_as_rgb.png", image);
  BOOST_TEST(read_index_image(dir() / "gray_as_rgb.png").pixels == (Bytes{9, 9, 9, 9}),
             boost::test_tools::per_element());
  image.at(1, 0, 2) = 10;
  write_png(dir() / "colour.png", image);
  const std::string message = error_of([] { read_index_image(dir() / "colour.png"); });
  BOOST_TEST(contains(message, (dir() / "colour.png").string()), message);
  BOOST_TEST(contains(message, "expected a single-channel (gray or palette) image of class indices"), message);
  BOOST_TEST(contains(message, "(9, 9, 10) at row 1, column 0"), message);
}

BOOST_AUTO_TEST_CASE(jpeg_round_trips_within_tolerance) {
  const Image image = gradient(24, 32);
  write_jpeg(dir() / "gradient.jpg", image, 95);
  const Image back = read_image(dir() / "gradient.jpg");
  BOOST_REQUIRE(back.channels == 3);
  BOOST_REQUIRE(back.height == 24 && back.width == 32);
  int worst = 0;
  double total = 0;
  for (std::size_t i = 0; i < image.pixels.size(); ++i) {
    const int d = std::abs(int{back.pixels[i]} - int{image.pixels[i]});
    worst = std::max(worst, d);
    total += d;
  }
  BOOST_TEST(worst <= 6);
  BOOST_TEST(total / static_cast<double>(image.pixels.size()) < 1.5);
  // A gray JPEG decodes to one channel; asking for RGB replicates it.
  write_jpeg(dir() / "gray.jpg", convert_color(image, ColorMode::gray), 95);
  BOOST_TEST(read_image(dir() / "gray.jpg").channels == 1);
  BOOST_TEST(read_image_tensor(dir() / "gray.jpg").shape() == (Shape{3, 24, 32}));
}

BOOST_AUTO_TEST_CASE(corrupt_png_is_an_error_naming_the_file) {
  const Bytes good = encode_png(pattern(16, 16, 3));
  const fs::path truncated = write_bytes(dir() / "truncated.png", Bytes(good.begin(), good.begin() + good.size() / 2));
  std::string message = error_of([&] { read_image(truncated); });
  BOOST_TEST(contains(message, truncated.string() + ": corrupt PNG"), message);
  BOOST_TEST(contains(message, "expected a complete, valid PNG stream"), message);
  BOOST_TEST(contains(message, "truncated"), message);

  Bytes damaged = good;
  damaged[damaged.size() / 2] ^= 0x5a;  // inside the image data: its CRC no longer matches
  const fs::path bad = write_bytes(dir() / "damaged.png", damaged);
  message = error_of([&] { read_image(bad); });
  BOOST_TEST(contains(message, bad.string() + ": corrupt PNG"), message);
  BOOST_TEST(contains(message, "expected a complete, valid PNG stream"), message);

  const fs::path text = write_bytes(dir() / "text.png", Bytes{'h', 'e', 'l', 'l', 'o'});
  message = error_of([&] { read_image(text); });
  BOOST_TEST(contains(message,
                      text.string() + ": expected a PNG (89 50 4e 47 ...) or JPEG (ff d8 ff) file, found 68 65 6c 6c"),
             message);
  message = error_of([&] { read_image(dir() / "absent.png"); });
  BOOST_TEST(contains(message, (dir() / "absent.png").string() + ": cannot open for reading"), message);
}

BOOST_AUTO_TEST_CASE(corrupt_jpeg_is_an_error_naming_the_file) {
  const Bytes good = encode_jpeg(gradient(64, 64), 90);
  const fs::path truncated =
      write_bytes(dir() / "truncated.jpg", Bytes(good.begin(), good.begin() + good.size() * 2 / 3));
  std::string message = error_of([&] { read_image(truncated); });
  BOOST_TEST(contains(message, truncated.string() + ": corrupt JPEG"), message);
  BOOST_TEST(contains(message, "expected a complete, valid JPEG stream"), message);
  BOOST_TEST(contains(message, "Premature end of JPEG file"), message);

  // Header only: the frame header is cut.
  const fs::path header = write_bytes(dir() / "header.jpg", Bytes(good.begin(), good.begin() + 40));
  message = error_of([&] { read_image(header); });
  BOOST_TEST(contains(message, header.string() + ": corrupt JPEG"), message);

  // Garbage in the entropy-coded data after the start-of-scan marker (ff da).
  Bytes garbage = good;
  std::size_t scan = 0;
  for (std::size_t i = 0; i + 1 < garbage.size(); ++i)
    if (garbage[i] == 0xff && garbage[i + 1] == 0xda) scan = i;
  BOOST_REQUIRE(scan > 0 && scan + 60 < garbage.size());
  for (std::size_t i = scan + 20; i < scan + 52; ++i) garbage[i] = static_cast<std::uint8_t>(i * 97);
  const fs::path damaged = write_bytes(dir() / "damaged.jpg", garbage);
  message = error_of([&] { read_image(damaged); });
  BOOST_TEST(contains(message, damaged.string() + ": corrupt JPEG"), message);
  BOOST_TEST(contains(message, "Corrupt JPEG data"), message);
}

BOOST_AUTO_TEST_SUITE_END()
