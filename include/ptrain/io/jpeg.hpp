#pragma once
// JPEG in memory through libjpeg-turbo (link ptrain::image): decoding to 8-bit gray or RGB,
// encoding gray or RGB. libjpeg's default error handler calls exit(); ours records the message
// and longjmps back, and the caller turns a failure into an Error naming the file.
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

#include "ptrain/core/error.hpp"
#include "ptrain/io/pixels.hpp"

namespace ptrain::io {

namespace detail {

struct JpegContext {
  jpeg_error_mgr manager;  // first: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "";
  unsigned char* encoded = nullptr;  // writing: libjpeg's malloc'd buffer
  unsigned long encoded_size = 0;
  char too_large[512] = "";  // reading: why the header's image is refused (see jpeg_decode)
};

// A sequential Huffman-coded JPEG spends at least 2 bits on each 8x8 block of each component (a DC
// code and an end-of-block code): at most 256 pixels, 256 bytes of each component, per byte of
// file. Progressive and arithmetic-coded ones can code runs of empty blocks in fewer bits, so only
// the pixel limit (image_pixel_limit) bounds them.
inline constexpr double sequential_jpeg_pixels_per_byte = 256;

[[noreturn]] inline void jpeg_on_error(j_common_ptr cinfo) {
  auto* ctx = reinterpret_cast<JpegContext*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, ctx->message);
  std::longjmp(ctx->jump, 1);
}

// libjpeg only warns about damaged data and fills in grey; a truncated or corrupt image is an
// error here. Warnings that do not mean lost pixels (stray bytes between markers) are ignored.
inline void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level != -1) return;
  switch (cinfo->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
      jpeg_on_error(cinfo);
    default:
      return;
  }
}

inline void jpeg_install_errors(JpegContext& ctx) {
  jpeg_std_error(&ctx.manager);
  ctx.manager.error_exit = jpeg_on_error;
  ctx.manager.emit_message = jpeg_on_message;
}

inline bool jpeg_decode(JpegContext& ctx, std::span<const std::uint8_t> bytes, Image& image) {
  jpeg_decompress_struct cinfo;
  std::memset(&cinfo, 0, sizeof cinfo);
  jpeg_install_errors(ctx);
  cinfo.err = &ctx.manager;
  if (setjmp(ctx.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const bool bounded = !cinfo.progressive_mode && !cinfo.arith_code;
  if (!image_size_allowed(ctx.too_large, cinfo.image_width, cinfo.image_height, cinfo.num_components,
                          static_cast<double>(cinfo.image_width) * cinfo.image_height * cinfo.num_components,
                          bytes.size(), bounded ? sequential_jpeg_pixels_per_byte * cinfo.num_components : 0,
                          "a sequential JPEG codes at most 256 pixels per byte")) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  image.height = cinfo.output_height;
  image.width = cinfo.output_width;
  image.channels = cinfo.output_components;
  const auto stride = static_cast<std::size_t>(image.width * image.channels);
  image.pixels.resize(static_cast<std::size_t>(image.height) * stride);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = image.pixels.data() + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

inline bool jpeg_encode(JpegContext& ctx, const Image& image, int quality) {
  jpeg_compress_struct cinfo;
  std::memset(&cinfo, 0, sizeof cinfo);
  jpeg_install_errors(ctx);
  cinfo.err = &ctx.manager;
  if (setjmp(ctx.jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &ctx.encoded, &ctx.encoded_size);
  cinfo.image_width = static_cast<JDIMENSION>(image.width);
  cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = static_cast<int>(image.channels);
  cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const auto stride = static_cast<std::size_t>(image.width * image.channels);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(image.pixels.data()) + cinfo.next_scanline * stride;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

}  // namespace detail

inline bool is_jpeg(std::span<const std::uint8_t> bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff;
}

// Gray JPEGs decode to 1 channel, colour ones (YCbCr, RGB) to RGB; `name` is what errors call
// the data (its file).
inline Image decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& name) {
  check(is_jpeg(bytes), name, ": expected a JPEG file (starting ff d8 ff), found ", detail::hex_bytes(bytes, 3));
  detail::JpegContext ctx;
  Image image;
  const bool decoded = detail::jpeg_decode(ctx, bytes, image);
  check(ctx.too_large[0] == '\0', name, ": ", ctx.too_large);
  if (!decoded)
    fail(name, ": corrupt JPEG (", bytes.size(), " bytes): ", ctx.message, " (expected a complete, valid JPEG stream)");
  return image;
}

// Baseline JPEG of a gray or RGB image, 4:2:0 chroma as libjpeg's defaults; quality 1..100.
inline std::vector<std::uint8_t> encode_jpeg(const Image& image, int quality = 95) {
  check((image.channels == 1 || image.channels == 3) && image.height > 0 && image.width > 0 &&
            image.pixels.size() == static_cast<std::size_t>(image.height * image.width * image.channels),
        "encode_jpeg: expected a non-empty gray or RGB image, got ", image.size_text(), "x", image.channels, " with ",
        image.pixels.size(), " bytes");
  check(quality >= 1 && quality <= 100, "encode_jpeg: expected a quality in 1..100, got ", quality);
  detail::JpegContext ctx;
  const bool ok = detail::jpeg_encode(ctx, image, quality);
  std::vector<std::uint8_t> out;
  if (ok) out.assign(ctx.encoded, ctx.encoded + ctx.encoded_size);
  std::free(ctx.encoded);
  check(ok, "encode_jpeg: libjpeg failed: ", ctx.message);
  return out;
}

}  // namespace ptrain::io
