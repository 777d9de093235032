// The libjpeg-turbo wrapper, in memory, then converted to each colour mode.
#include "image_input.hpp"
#include "ptrain/io/image.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ptrain::fuzz::refuse_cleanly([&] {
    const auto image = ptrain::io::decode_jpeg({data, size}, "input.jpeg");
    ptrain::io::convert_color(image, ptrain::io::ColorMode::gray);
    ptrain::io::to_tensor(ptrain::io::convert_color(image, ptrain::io::ColorMode::rgb));
  });
}
