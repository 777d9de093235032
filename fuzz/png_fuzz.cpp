// The libpng wrapper, in memory: decoded to RGB(A) and with palette indices kept (class masks),
// then converted to each colour mode.
#include "image_input.hpp"
#include "ptrain/io/image.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  ptrain::fuzz::refuse_cleanly([&] { ptrain::io::decode_png(bytes, "input.png", true); });
  return ptrain::fuzz::refuse_cleanly([&] {
    const auto image = ptrain::io::decode_png(bytes, "input.png");
    ptrain::io::convert_color(image, ptrain::io::ColorMode::gray);
    ptrain::io::to_tensor(ptrain::io::convert_color(image, ptrain::io::ColorMode::rgb));
  });
}
