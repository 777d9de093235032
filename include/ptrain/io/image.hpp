#pragma once
// PNG and JPEG files (link ptrain::image, which defines PTRAIN_HAS_IMAGE): reading into pixels or
// a [C, H, W] float tensor in [0, 1], the format told by the file's first bytes; writing PNG and
// JPEG atomically. Every error names the file.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/io/atomic_file.hpp"
#include "ptrain/io/jpeg.hpp"
#include "ptrain/io/pixels.hpp"
#include "ptrain/io/png.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::io {

inline std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  check(file != nullptr, path.string(), ": cannot open for reading: ", std::strerror(errno));
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0) bytes.insert(bytes.end(), chunk, chunk + got);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  check(!failed, path.string(), ": read error after ", bytes.size(), " bytes");
  return bytes;
}

// A PNG or JPEG held in memory; `name` is what errors call it.
inline Image decode_image(std::span<const std::uint8_t> bytes, const std::string& name,
                          ColorMode mode = ColorMode::unchanged) {
  if (is_png(bytes)) return convert_color(decode_png(bytes, name), mode);
  if (is_jpeg(bytes)) return convert_color(decode_jpeg(bytes, name), mode);
  fail(name, ": expected a PNG (89 50 4e 47 ...) or JPEG (ff d8 ff) file, found ", detail::hex_bytes(bytes, 4));
}

inline Image read_image(const std::filesystem::path& path, ColorMode mode = ColorMode::unchanged) {
  return decode_image(read_file_bytes(path), path.string(), mode);
}

// torchvision's default: RGB, [3, H, W] in [0, 1].
inline Tensor<float> read_image_tensor(const std::filesystem::path& path, ColorMode mode = ColorMode::rgb) {
  return to_tensor(read_image(path, mode));
}

// One value per pixel, for class-index masks: a palette PNG gives its indices, a gray PNG or
// JPEG its values, an RGB(A) image its value where R = G = B everywhere (alpha is ignored).
inline Image read_index_image(const std::filesystem::path& path) {
  const auto bytes = read_file_bytes(path);
  const std::string name = path.string();
  Image image = is_png(bytes) ? decode_png(bytes, name, true) : decode_image(bytes, name);
  if (image.channels == 1) return image;
  Image out(image.height, image.width, 1);
  for (std::int64_t y = 0; y < image.height; ++y)
    for (std::int64_t x = 0; x < image.width; ++x) {
      const std::uint8_t v = image.at(y, x, 0);
      check(image.channels <= 2 || (image.at(y, x, 1) == v && image.at(y, x, 2) == v), name,
            ": expected a single-channel (gray or palette) image of class indices, found colour (", int{v}, ", ",
            int{image.at(y, x, 1)}, ", ", int{image.at(y, x, 2)}, ") at row ", y, ", column ", x);
      out.at(y, x, 0) = v;
    }
  return out;
}

inline void write_file_bytes(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  write_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  });
}

inline void write_png(const std::filesystem::path& path, const Image& image) {
  write_file_bytes(path, encode_png(image));
}

inline void write_jpeg(const std::filesystem::path& path, const Image& image, int quality = 95) {
  write_file_bytes(path, encode_jpeg(image, quality));
}

}  // namespace ptrain::io
