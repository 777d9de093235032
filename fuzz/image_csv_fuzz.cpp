// An image CSV (header, then one `image,level` row per image) listing the images of a directory
// holding two small valid PNGs, a.png and b.png; the first rows are loaded as examples.
#include <algorithm>

#include "image_input.hpp"
#include "ptrain/data/image_csv.hpp"

namespace {
const std::filesystem::path& image_directory() {
  static const std::filesystem::path dir = [] {
    const auto path = ptrain::fuzz::scratch() / "images";
    std::filesystem::create_directories(path);
    ptrain::io::Image gray(2, 3, 1), rgb(3, 2, 3);
    for (std::size_t i = 0; i < rgb.pixels.size(); ++i) rgb.pixels[i] = static_cast<std::uint8_t>(40 * i);
    ptrain::fuzz::write_file(path / "a.png", ptrain::io::encode_png(gray));
    ptrain::fuzz::write_file(path / "b.png", ptrain::io::encode_png(rgb));
    return path;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& images = image_directory();
  const auto csv = ptrain::fuzz::input_file(data, size, "labels.csv");
  return ptrain::fuzz::refuse_cleanly([&] {
    ptrain::ImageCsvOptions options;
    options.extension = ".png";
    const ptrain::ImageCsv dataset(csv, images, options);
    for (std::int64_t i = 0; i < std::min<std::int64_t>(dataset.size(), 3); ++i) dataset.get(i);
  });
}
