#pragma once
// Small images that tests write in the real formats (needs ptrain::image).
#include <csetjmp>
#include <cstdint>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <png.h>

#include <ptrain/io/pixels.hpp>

namespace ptrain::test {

// Pixel (y, x, c) = (seed + 37 y + 11 x + 53 c) mod 256: every channel and position differs.
inline io::Image pattern_image(std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t seed = 0) {
  io::Image image(h, w, c);
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      for (std::int64_t k = 0; k < c; ++k)
        image.at(y, x, k) = static_cast<std::uint8_t>((seed + y * 37 + x * 11 + k * 53) % 256);
  return image;
}

// A smooth RGB image, the kind JPEG keeps well; seed shifts its colours.
inline io::Image gradient_image(std::int64_t h, std::int64_t w, std::int64_t seed = 0) {
  io::Image image(h, w, 3);
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x) {
      image.at(y, x, 0) = static_cast<std::uint8_t>(40 + seed % 50 + 150 * x / w);
      image.at(y, x, 1) = static_cast<std::uint8_t>(60 + 120 * y / h);
      image.at(y, x, 2) = static_cast<std::uint8_t>(200 - seed % 50 - 100 * (x + y) / (w + h));
    }
  return image;
}

// A PNG of any bit depth and colour type, written with libpng directly (our encoder writes 8-bit
// only): rows are already packed as the format wants them.
inline std::vector<std::uint8_t> raw_png(int width, int height, int bit_depth, int color_type,
                                         const std::vector<std::vector<std::uint8_t>>& rows,
                                         const std::vector<png_color>& palette = {},
                                         const std::vector<std::uint8_t>& transparency = {}) {
  static std::vector<std::uint8_t> out;
  out.clear();
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> pointers;
  for (const auto& row : rows) pointers.push_back(const_cast<png_bytep>(row.data()));
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    BOOST_FAIL("libpng failed to write the test image");
  }
  png_set_write_fn(
      png, nullptr, [](png_structp, png_bytep data, png_size_t n) { out.insert(out.end(), data, data + n); },
      [](png_structp) {});
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), bit_depth, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  if (!transparency.empty())
    png_set_tRNS(png, info, transparency.data(), static_cast<int>(transparency.size()), nullptr);
  png_write_info(png, info);
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

}  // namespace ptrain::test
