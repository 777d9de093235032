#pragma once
// Decoded images as 8-bit pixels (height x width x channels, interleaved), conversions between
// gray and RGB, and the CHW float tensors in [0, 1] that models take. No codec needed here.
#include <algorithm>
#include <atomic>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::io {

// channels: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA (as stored); pixels[(y * width + x) * channels + c].
struct Image {
  std::int64_t height = 0, width = 0, channels = 0;
  std::vector<std::uint8_t> pixels;

  Image() = default;
  Image(std::int64_t h, std::int64_t w, std::int64_t c)
      : height(h), width(w), channels(c), pixels(static_cast<std::size_t>(h * w * c)) {}
  std::uint8_t& at(std::int64_t y, std::int64_t x, std::int64_t c) {
    return pixels[static_cast<std::size_t>((y * width + x) * channels + c)];
  }
  std::uint8_t at(std::int64_t y, std::int64_t x, std::int64_t c) const {
    return pixels[static_cast<std::size_t>((y * width + x) * channels + c)];
  }
  std::string size_text() const { return std::to_string(width) + "x" + std::to_string(height); }
};

// The largest image decoded, in pixels (width x height): PIL's decompression-bomb limit (twice
// Image.MAX_IMAGE_PIXELS, where PIL raises DecompressionBombError). A header claiming more is
// refused before any pixel is allocated; the codecs also check the claim against the file's size
// where the format bounds how much a byte can expand.
inline constexpr std::int64_t max_image_pixels = 2 * 89'478'485;

namespace detail {
inline std::atomic<std::int64_t>& pixel_limit() {
  static std::atomic<std::int64_t> limit{max_image_pixels};
  return limit;
}
}  // namespace detail

// The limit in force: max_image_pixels unless lowered, as PIL's Image.MAX_IMAGE_PIXELS can be, by a
// service decoding untrusted files or a fuzzer. Only the limit bounds an arithmetic-coded or
// progressive JPEG: a flat 12-Mpixel arithmetic-coded one takes 125 bytes.
inline std::int64_t image_pixel_limit() { return detail::pixel_limit().load(); }
inline void set_image_pixel_limit(std::int64_t pixels) {
  check(pixels > 0 && pixels <= max_image_pixels, "set_image_pixel_limit: expected 1 to io::max_image_pixels (",
        max_image_pixels, ") pixels, got ", pixels);
  detail::pixel_limit() = pixels;
}

// What to decode into: the channels as stored, or converted as PIL's convert("L") / ("RGB").
enum class ColorMode { unchanged, gray, rgb };

// PIL's ITU-R 601-2 luma in 16-bit fixed point: L = (19595 R + 38470 G + 7471 B + 2^15) >> 16.
inline std::uint8_t luma(std::uint8_t r, std::uint8_t g, std::uint8_t b) {
  return static_cast<std::uint8_t>((19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16);
}

// Drops alpha, and converts gray <-> RGB, as the mode asks.
inline Image convert_color(Image image, ColorMode mode) {
  const std::int64_t from = image.channels;
  check(from >= 1 && from <= 4, "convert_color: expected 1 to 4 channels, got ", from);
  const std::int64_t to = mode == ColorMode::gray ? 1 : mode == ColorMode::rgb ? 3 : from;
  if (to == from) return image;
  Image out(image.height, image.width, to);
  const std::int64_t n = image.height * image.width;
  const std::uint8_t* src = image.pixels.data();
  std::uint8_t* dst = out.pixels.data();
  const bool color = from >= 3;
  for (std::int64_t i = 0; i < n; ++i, src += from, dst += to) {
    if (to == 1)
      dst[0] = color ? luma(src[0], src[1], src[2]) : src[0];
    else
      for (int c = 0; c < 3; ++c) dst[c] = color ? src[c] : src[0];
  }
  return out;
}

namespace detail {
inline const std::array<float, 256>& unit_scale() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return table;
}

inline std::string image_claim(std::int64_t width, std::int64_t height, std::int64_t channels) {
  return "the header claims " + std::to_string(width) + "x" + std::to_string(height) + " pixels of " +
         std::to_string(channels) + (channels == 1 ? " channel" : " channels");
}

// Why an image of width x height pixels may not be decoded, or "" when it may: more than
// max_image_pixels, or more bytes of image data (`data_bytes`, as stored) than the file's
// `file_bytes` can hold at `expansion` bytes per file byte (0: the format gives no bound).
inline std::string image_size_problem(std::int64_t width, std::int64_t height, std::int64_t channels,
                                      double data_bytes, std::size_t file_bytes, double expansion,
                                      const char* expansion_reason) {
  const std::int64_t limit = image_pixel_limit();
  if (static_cast<double>(width) * static_cast<double>(height) > static_cast<double>(limit))
    return image_claim(width, height, channels) +
           (limit == max_image_pixels ? ", more than io::max_image_pixels (" + std::to_string(limit) +
                                            ", PIL's DecompressionBombError limit)"
                                      : ", more than the " + std::to_string(limit) +
                                            " of io::set_image_pixel_limit");
  const double most = static_cast<double>(file_bytes) * expansion;
  if (expansion > 0 && data_bytes > most) {
    char numbers[128];
    std::snprintf(numbers, sizeof numbers, ", %.0f bytes of image data, but a %zu-byte file holds at most %.0f",
                  data_bytes, file_bytes, most);
    return image_claim(width, height, channels) + numbers + " (" + expansion_reason + ")";
  }
  return "";
}

// image_size_problem written into a codec context's buffer, which no destructor must own (libpng
// and libjpeg longjmp across the decoder's frame); true when the image may be decoded.
template <std::size_t N>
bool image_size_allowed(char (&why)[N], std::int64_t width, std::int64_t height, std::int64_t channels,
                        double data_bytes, std::size_t file_bytes, double expansion, const char* expansion_reason) {
  const std::string problem =
      image_size_problem(width, height, channels, data_bytes, file_bytes, expansion, expansion_reason);
  std::snprintf(why, N, "%s", problem.c_str());
  return problem.empty();
}

// The first n bytes in hex ("89 50 4e 47"), for errors about a file's signature.
inline std::string hex_bytes(std::span<const std::uint8_t> bytes, std::size_t n) {
  std::string out;
  char part[4];
  for (std::size_t i = 0; i < std::min(n, bytes.size()); ++i) {
    std::snprintf(part, sizeof part, "%s%02x", i ? " " : "", bytes[i]);
    out += part;
  }
  return bytes.empty() ? "an empty file" : out;
}

}  // namespace detail

// [C, H, W] floats v / 255, as torchvision's to_tensor.
inline Tensor<float> to_tensor(const Image& image) {
  const std::int64_t c = image.channels, plane = image.height * image.width;
  Tensor<float> out(Shape{c, image.height, image.width});
  const auto& scale = detail::unit_scale();
  float* dst = out.data();
  const std::uint8_t* src = image.pixels.data();
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t i = 0; i < plane; ++i) dst[k * plane + i] = scale[src[i * c + k]];
  return out;
}

// The inverse of to_tensor: [C, H, W] in [0, 1] (clamped) to pixels round(255 v).
inline Image to_image(const Tensor<float>& chw) {
  check(chw.rank() == 3 && chw.size(0) >= 1 && chw.size(0) <= 4,
        "to_image: expected [C, H, W] with 1 to 4 channels, got ", chw.shape());
  const std::int64_t c = chw.size(0), plane = chw.size(1) * chw.size(2);
  Image out(chw.size(1), chw.size(2), c);
  const float* src = chw.data();
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t i = 0; i < plane; ++i) {
      const float v = std::fmin(std::fmax(src[k * plane + i], 0.0f), 1.0f);
      out.pixels[static_cast<std::size_t>(i * c + k)] = static_cast<std::uint8_t>(std::lround(v * 255.0f));
    }
  return out;
}

}  // namespace ptrain::io
