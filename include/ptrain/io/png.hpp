#pragma once
// PNG in memory through libpng (link ptrain::image): decoding any PNG into 8-bit pixels, encoding
// 8-bit gray, gray + alpha, RGB and RGBA. libpng reports errors by longjmp, so the functions that
// call it hold no object whose destructor a jump could skip, and the caller turns a failure into
// an Error naming the file.
#include <algorithm>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <png.h>

#include "ptrain/core/error.hpp"
#include "ptrain/io/pixels.hpp"

namespace ptrain::io {

namespace detail {

struct PngContext {
  std::jmp_buf jump;
  char message[256] = "";
  std::span<const std::uint8_t> input;  // reading
  std::size_t offset = 0;
  std::vector<std::uint8_t>* output = nullptr;  // writing
  char too_large[512] = "";  // reading: why the header's image is refused (see png_decode)
};

// deflate expands a byte to at most 1032 (RFC 1951's longest match, 258 bytes, in a 2-bit code).
inline constexpr double deflate_expansion = 1032;

inline void png_on_error(png_structp png, png_const_charp message) {
  auto* ctx = static_cast<PngContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->message, sizeof ctx->message, "%s", message);
  std::longjmp(ctx->jump, 1);
}
inline void png_on_warning(png_structp, png_const_charp) {}

inline void png_read_memory(png_structp png, png_bytep dst, png_size_t n) {
  auto* ctx = static_cast<PngContext*>(png_get_io_ptr(png));
  if (n > ctx->input.size() - ctx->offset) png_error(png, "the file ends early (truncated)");
  std::memcpy(dst, ctx->input.data() + ctx->offset, n);
  ctx->offset += n;
}
inline void png_write_memory(png_structp png, png_bytep src, png_size_t n) {
  auto* out = static_cast<PngContext*>(png_get_io_ptr(png))->output;
  out->insert(out->end(), src, src + n);
}
inline void png_flush_memory(png_structp) {}

// False, with ctx.message set, when libpng fails. Palette images keep their indices when asked
// (class-index masks), else become RGB(A); 16-bit samples are cut to 8, 1/2/4-bit ones widened.
inline bool png_decode(PngContext& ctx, bool palette_indices, Image& image) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, png_on_error, png_on_warning);
  if (!png) return std::snprintf(ctx.message, sizeof ctx.message, "libpng: out of memory"), false;
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows;
  if (setjmp(ctx.jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  if (!info) png_error(png, "out of memory");
  png_set_read_fn(png, &ctx, png_read_memory);
  // Only IHDR, PLTE, tRNS, IDAT and IEND matter here; every other chunk is skipped unread. libpng
  // reads a metadata chunk (zTXt, iCCP, ...) into a buffer of the length it claims, so a corrupt
  // length made a 69-byte PNG allocate and clear 1 GiB before it was found truncated.
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  // The pixel data as stored (before any widening) comes out of deflate, so the file's size bounds
  // it: a header claiming a huge image is refused here, before the pixels are allocated.
  const double stored_bytes = static_cast<double>(png_get_image_width(png, info)) * png_get_image_height(png, info) *
                              png_get_channels(png, info) * bit_depth / 8;
  if (!image_size_allowed(ctx.too_large, png_get_image_width(png, info), png_get_image_height(png, info),
                          png_get_channels(png, info), stored_bytes, ctx.input.size(), deflate_expansion,
                          "deflate expands a byte to at most 1032")) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  const bool keep_indices = palette_indices && color_type == PNG_COLOR_TYPE_PALETTE;
  if (bit_depth == 16) png_set_strip_16(png);
  if (bit_depth < 8) keep_indices ? png_set_packing(png) : png_set_expand(png);
  if (color_type == PNG_COLOR_TYPE_PALETTE && !keep_indices) png_set_palette_to_rgb(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS) && !keep_indices) png_set_tRNS_to_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  image.height = png_get_image_height(png, info);
  image.width = png_get_image_width(png, info);
  image.channels = png_get_channels(png, info);
  if (png_get_rowbytes(png, info) != static_cast<png_size_t>(image.width * image.channels))
    png_error(png, "unexpected row size after conversion to 8 bits");
  image.pixels.resize(static_cast<std::size_t>(image.height * image.width * image.channels));
  rows.resize(static_cast<std::size_t>(image.height));
  for (std::size_t y = 0; y < rows.size(); ++y)
    rows[y] = image.pixels.data() + y * static_cast<std::size_t>(image.width * image.channels);
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

inline bool png_encode(PngContext& ctx, const Image& image) {
  static constexpr int color_types[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                        PNG_COLOR_TYPE_RGB_ALPHA};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ctx, png_on_error, png_on_warning);
  if (!png) return std::snprintf(ctx.message, sizeof ctx.message, "libpng: out of memory"), false;
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows(static_cast<std::size_t>(image.height));
  for (std::size_t y = 0; y < rows.size(); ++y)
    rows[y] = const_cast<png_bytep>(image.pixels.data()) + y * static_cast<std::size_t>(image.width * image.channels);
  if (setjmp(ctx.jump)) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  if (!info) png_error(png, "out of memory");
  png_set_write_fn(png, &ctx, png_write_memory, png_flush_memory);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               color_types[image.channels - 1], PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace detail

inline bool is_png(std::span<const std::uint8_t> bytes) {
  return bytes.size() >= 8 && png_sig_cmp(bytes.data(), 0, 8) == 0;
}

// `name` is what errors call the data (its file). See png_decode for palette_indices.
inline Image decode_png(std::span<const std::uint8_t> bytes, const std::string& name, bool palette_indices = false) {
  check(is_png(bytes), name, ": expected a PNG file (signature 89 50 4e 47 0d 0a 1a 0a), found ",
        detail::hex_bytes(bytes, 8));
  detail::PngContext ctx;
  ctx.input = bytes;
  Image image;
  const bool decoded = detail::png_decode(ctx, palette_indices, image);
  check(ctx.too_large[0] == '\0', name, ": ", ctx.too_large);
  if (!decoded)
    fail(name, ": corrupt PNG after ", ctx.offset, " of ", bytes.size(), " bytes: ", ctx.message,
         " (expected a complete, valid PNG stream)");
  return image;
}

inline std::vector<std::uint8_t> encode_png(const Image& image) {
  check(image.channels >= 1 && image.channels <= 4 && image.height > 0 && image.width > 0 &&
            image.pixels.size() == static_cast<std::size_t>(image.height * image.width * image.channels),
        "encode_png: expected a non-empty image of 1 to 4 channels, got ", image.size_text(), "x", image.channels,
        " with ", image.pixels.size(), " bytes");
  std::vector<std::uint8_t> out;
  detail::PngContext ctx;
  ctx.output = &out;
  if (!detail::png_encode(ctx, image)) fail("encode_png: libpng failed: ", ctx.message);
  return out;
}

}  // namespace ptrain::io
