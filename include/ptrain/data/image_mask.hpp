#pragma once
// Segmentation pairs: the images of one directory and their masks in another, matched by file
// stem (mask stem = image stem + an optional suffix, e.g. Carvana's "_mask"). An example is the
// image [C, H, W] in [0, 1] and its mask as a target map [H, W] of class indices: a class-index
// PNG (palette indices or gray values) as is, or a binary 0/255 mask as 0/1.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/detail/image_files.hpp"
#include "ptrain/io/image.hpp"

namespace ptrain {

enum class MaskValues {
  class_index,  // each pixel value is its class
  binary_255,   // 0 -> 0 and 255 -> 1; any other value is an error
};

struct ImageMaskOptions {
  MaskValues values = MaskValues::class_index;
  std::int64_t num_classes = 0;  // class_index: every value must be below it (0: not checked)
  std::string mask_suffix;       // appended to the image's stem to name its mask
  io::ColorMode mode = io::ColorMode::rgb;
};

class ImageMaskFolder {
 public:
  ImageMaskFolder(const std::filesystem::path& image_dir, const std::filesystem::path& mask_dir,
                  ImageMaskOptions options = {})
      : options_(std::move(options)) {
    detail::require_directory(image_dir, "ImageMaskFolder", "the directory of the images");
    detail::require_directory(mask_dir, "ImageMaskFolder", "the directory of the masks");
    std::map<std::string, std::filesystem::path> masks;  // by stem
    for (const auto& mask : detail::list_image_files(mask_dir, false)) {
      const auto [at, added] = masks.emplace(mask.stem().string(), mask);
      check(added, "ImageMaskFolder: ", at->second.string(), " and ", mask.string(), " both name the mask of stem '",
            at->first, "': expected one mask per image");
    }
    images_ = detail::list_image_files(image_dir, false);
    check(!images_.empty(), "ImageMaskFolder: ", image_dir.string(), " holds no ", detail::image_extensions_text,
          " file: expected the images");
    for (const auto& image : images_) {
      const std::string stem = image.stem().string() + options_.mask_suffix;
      const auto found = masks.find(stem);
      check(found != masks.end(), "ImageMaskFolder: image ", image.string(), " has no mask: expected ",
            (mask_dir / stem).string(), " with extension ", detail::image_extensions_text);
      masks_.push_back(found->second);
    }
  }

  std::int64_t size() const { return static_cast<std::int64_t>(images_.size()); }
  Example get(std::int64_t i) const {
    check(i >= 0 && i < size(), "ImageMaskFolder: index ", i, " out of range for ", size(), " pairs");
    const auto k = static_cast<std::size_t>(i);
    const io::Image image = io::read_image(images_[k], options_.mode);
    const io::Image mask = io::read_index_image(masks_[k]);
    check(mask.height == image.height && mask.width == image.width, "ImageMaskFolder: mask ", masks_[k].string(),
          " is ", mask.size_text(), " but its image ", images_[k].string(), " is ", image.size_text(),
          " (width x height): expected the mask to have its image's size");
    return {io::to_tensor(image), 0, target_map(mask, masks_[k])};
  }

  const std::vector<std::filesystem::path>& images() const { return images_; }
  const std::vector<std::filesystem::path>& masks() const { return masks_; }

 private:
  Tensor<std::int64_t> target_map(const io::Image& mask, const std::filesystem::path& path) const {
    Tensor<std::int64_t> map(Shape{mask.height, mask.width});
    const bool binary = options_.values == MaskValues::binary_255;
    for (std::int64_t i = 0; i < map.numel(); ++i) {
      const std::uint8_t v = mask.pixels[static_cast<std::size_t>(i)];
      if (binary && v != 0 && v != 255)
        fail("ImageMaskFolder: mask ", path.string(), ": value ", int{v}, " at row ", i / mask.width, ", column ",
             i % mask.width, ": expected 0 or 255 (a binary mask)");
      if (!binary && options_.num_classes > 0 && v >= options_.num_classes)
        fail("ImageMaskFolder: mask ", path.string(), ": value ", int{v}, " at row ", i / mask.width, ", column ",
             i % mask.width, ": expected a class index below ", options_.num_classes);
      map[i] = binary ? v / 255 : v;
    }
    return map;
  }

  ImageMaskOptions options_;
  std::vector<std::filesystem::path> images_, masks_;
};

}  // namespace ptrain
