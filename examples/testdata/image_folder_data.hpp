#pragma once
// Tiny ImageFolder trees (root/<split>/<class>/<image>) in the layouts of two projects:
//   coil100/   TrainData/, ValidationData/ with obj<k>/obj<k>__<angle>.png   (VGG-F on COIL-100)
//   imagenet/  train/, val/ with n<wnid>/n<wnid>_<i>.JPEG                    (ImageNet ResNet)
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/io/image.hpp>

#include "class_pixels.hpp"

namespace example_data {

struct FolderSplit {
  std::string name;
  int images_per_class;
};

// An RGB image of the class's colour: pixel() drawn independently per pixel and channel.
inline ptrain::io::Image class_image(ptrain::Rng& rng, int label, int size) {
  ptrain::io::Image image(size, size, 3);
  for (std::int64_t y = 0; y < size; ++y)
    for (std::int64_t x = 0; x < size; ++x)
      for (int c = 0; c < 3; ++c) image.at(y, x, c) = pixel(rng, label, c);
  return image;
}

// root/<split>/<class>/<file_name(split, class, n)> for the n-th image of each split (n counts
// over all of the split's classes); PNG or JPEG as the file name's extension says.
template <class FileName>
void image_folder_tree(const std::filesystem::path& root, const std::vector<FolderSplit>& splits,
                       const std::vector<std::string>& classes, int size, ptrain::Rng& rng, FileName file_name) {
  for (const auto& split : splits)
    for (int k = 0, n = 0; k < static_cast<int>(classes.size()); ++k)
      for (int i = 0; i < split.images_per_class; ++i, ++n) {
        const std::filesystem::path file = root / split.name / classes[k] / file_name(split.name, classes[k], n);
        const ptrain::io::Image image = class_image(rng, k, size);
        if (file.extension() == ".png")
          ptrain::io::write_png(file, image);
        else
          ptrain::io::write_jpeg(file, image);
      }
}

// COIL-100's objects, one folder each, named by object and angle in degrees (obj1__0.png, obj1__5.png).
inline void coil100(const std::filesystem::path& dir, ptrain::Rng& rng) {
  image_folder_tree(dir, {{"TrainData", 8}, {"ValidationData", 4}}, {"obj1", "obj2", "obj3"}, 64, rng,
                    [](const std::string&, const std::string& object, int n) {
                      return object + "__" + std::to_string(5 * n) + ".png";
                    });
}

// ImageNet's synset folders (the first three WordNet ids), named as in ILSVRC2012 with the
// validation images sorted into class folders: train/n01440764/n01440764_10000.JPEG,
// val/n01440764/ILSVRC2012_val_00000001.JPEG.
inline void imagenet(const std::filesystem::path& dir, ptrain::Rng& rng) {
  image_folder_tree(dir, {{"train", 16}, {"val", 8}}, {"n01440764", "n01443537", "n01484850"}, 80, rng,
                    [](const std::string& split, const std::string& wnid, int n) {
                      if (split == "train") return wnid + "_" + std::to_string(10000 + n) + ".JPEG";
                      const std::string number = std::to_string(n + 1);
                      return "ILSVRC2012_val_" + std::string(8 - number.size(), '0') + number + ".JPEG";
                    });
}

}  // namespace example_data
