#pragma once
// torchvision's ImageFolder: root/<class>/**/*.png|jpg|jpeg, classes numbered in the sorted order
// of their folder names, images in sorted path order. Images are decoded on each get() to
// [C, H, W] in [0, 1] at their own size: a loader transform (Resize, CenterCrop) brings them to
// one size, or write_tensor_cache stores them transformed. A layout such as VGG-F's
// root/TrainData and root/ValidationData is two ImageFolders, one per directory.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/detail/image_files.hpp"
#include "ptrain/io/image.hpp"

namespace ptrain {

class ImageFolder {
 public:
  explicit ImageFolder(const std::filesystem::path& root, io::ColorMode mode = io::ColorMode::rgb)
      : root_(root), mode_(mode) {
    detail::require_directory(root, "ImageFolder", "one folder of images per class");
    for (const auto& entry : std::filesystem::directory_iterator(root))
      if (entry.is_directory()) class_names_.push_back(entry.path().filename().string());
    std::sort(class_names_.begin(), class_names_.end());
    check(!class_names_.empty(), "ImageFolder: ", root.string(),
          " has no class folders: expected root/<class>/<image> with ", detail::image_extensions_text, " images");
    for (std::size_t k = 0; k < class_names_.size(); ++k) {
      const auto files = detail::list_image_files(root / class_names_[k], true);
      check(!files.empty(), "ImageFolder: ", (root / class_names_[k]).string(), " holds no ",
            detail::image_extensions_text, " file: expected at least one image for class '", class_names_[k], "'");
      files_.insert(files_.end(), files.begin(), files.end());
      targets_.insert(targets_.end(), files.size(), static_cast<std::int64_t>(k));
    }
  }

  std::int64_t size() const { return static_cast<std::int64_t>(files_.size()); }
  Example get(std::int64_t i) const {
    check(i >= 0 && i < size(), "ImageFolder: index ", i, " out of range for ", size(), " images in ", root_.string());
    const auto k = static_cast<std::size_t>(i);
    return {io::read_image_tensor(files_[k], mode_), targets_[k]};
  }

  // Folder names in class-index order.
  const std::vector<std::string>& class_names() const { return class_names_; }
  std::int64_t num_classes() const { return static_cast<std::int64_t>(class_names_.size()); }
  const std::vector<std::filesystem::path>& files() const { return files_; }
  const std::vector<std::int64_t>& targets() const { return targets_; }
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
  io::ColorMode mode_;
  std::vector<std::string> class_names_;
  std::vector<std::filesystem::path> files_;
  std::vector<std::int64_t> targets_;
};

}  // namespace ptrain
