// An image and its segmentation mask. The input is one options byte (bit 0: binary 0/255 mask,
// else class indices; bits 1..7: the number of classes, 0 for unchecked), the image's length as
// 2 bytes little-endian, the image's bytes, then the mask's bytes (PNG or JPEG each).
#include "image_input.hpp"
#include "ptrain/data/image_mask.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::size_t image_bytes = std::min<std::size_t>(data[1] | (std::size_t{data[2]} << 8), size - 3);
  const auto root = ptrain::fuzz::scratch();
  std::filesystem::create_directories(root / "images");
  std::filesystem::create_directories(root / "masks");
  ptrain::fuzz::write_file(root / "images" / "x.png", {data + 3, image_bytes});
  ptrain::fuzz::write_file(root / "masks" / "x_mask.png", {data + 3 + image_bytes, size - 3 - image_bytes});
  return ptrain::fuzz::refuse_cleanly([&] {
    ptrain::ImageMaskOptions options;
    options.values = data[0] & 1 ? ptrain::MaskValues::binary_255 : ptrain::MaskValues::class_index;
    options.num_classes = data[0] >> 1;
    options.mask_suffix = "_mask";
    const ptrain::ImageMaskFolder pairs(root / "images", root / "masks", options);
    pairs.get(0);
  });
}
