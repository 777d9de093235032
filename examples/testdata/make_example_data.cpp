// Writes tiny datasets in the real formats of the projects the examples come from, for their
// smoke tests: `make_example_data DIR` fills
//   DIR/cifar10/   data_batch_1..5.bin, test_batch.bin (3,073-byte records)
//   DIR/coil100/   TrainData/, ValidationData/: ImageFolders of PNGs (image_folder_data.hpp)
//   DIR/imagenet/  train/, val/: ImageFolders of JPEGs (image_folder_data.hpp)
//   DIR/retina/    trainLabels.csv, train/*.jpeg, inception_v3.safetensors (retina_and_masks_data.hpp)
//   DIR/cells/     images/*.png, masks/*.png (0/255) (retina_and_masks_data.hpp)
//   DIR/triplet/   triplets.csv, frames/*.png, resnet18.safetensors (triplet_data.hpp)
// Images are random but learnable: each class has its own mean colour.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ptrain/core/error.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/io/atomic_file.hpp>

#include "class_pixels.hpp"
#include "image_folder_data.hpp"
#include "retina_and_masks_data.hpp"
#include "triplet_data.hpp"

namespace fs = std::filesystem;

namespace {

using example_data::pixel;

// Four of CIFAR-10's ten labels, each with its own colours: ResNet-18 tells them apart in the
// smoke tests' few steps, pipelined (batch norm over micro-batches of four) too.
void cifar10(const fs::path& dir, ptrain::Rng& rng) {
  constexpr int classes = 4;
  fs::create_directories(dir);
  const auto write_batch = [&](const std::string& name, int records) {
    std::string bytes;
    for (int r = 0; r < records; ++r) {
      const int label = r % classes;
      bytes.push_back(static_cast<char>(label));
      for (int c = 0; c < 3; ++c)
        for (int i = 0; i < 32 * 32; ++i) bytes.push_back(static_cast<char>(pixel(rng, label, c)));
    }
    ptrain::io::write_atomically(dir / name, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
  };
  for (int k = 1; k <= 5; ++k) write_batch("data_batch_" + std::to_string(k) + ".bin", 16);
  write_batch("test_batch.bin", 40);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_example_data DIR\n");
    return 2;
  }
  try {
    const fs::path root = argv[1];
    ptrain::Rng rng(2024);
    cifar10(root / "cifar10", rng);
    example_data::coil100(root / "coil100", rng);
    example_data::imagenet(root / "imagenet", rng);
    example_data::retina(root / "retina");
    example_data::cells(root / "cells");
    example_data::triplet(root / "triplet");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_example_data: %s\n", e.what());
    return 1;
  }
  return 0;
}
