// Writes tiny datasets in the real formats of the projects the examples come from, for their
// smoke tests: `make_example_data DIR` fills
//   DIR/cifar10/   data_batch_1..5.bin, test_batch.bin (3,073-byte records)
//   DIR/coil100/   TrainData/, ValidationData/: ImageFolders of PNGs (image_folder_data.hpp)
//   DIR/imagenet/  train/, val/: ImageFolders of JPEGs (image_folder_data.hpp)
//   DIR/retina/    trainLabels.csv, train/*.jpeg, inception_v3.safetensors (retina_and_masks_data.hpp)
//   DIR/cells/     images/*.png, masks/*.png (0/255) (retina_and_masks_data.hpp)
//   DIR/triplet/   triplets.csv, frames/*.png, resnet18.safetensors (triplet_data.hpp)
//   DIR/fashion_mnist/  train-* and t10k-{images-idx3,labels-idx1}-ubyte (IDX, uncompressed)
// Images are random but learnable: each class has its own mean colour.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
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

// Fashion-MNIST's four IDX files, 128 training and 64 test images of 28x28 in four classes of
// their own grey level: enough for a run of a few steps (the sweeps' tests, tools/).
void fashion_mnist(const fs::path& dir, ptrain::Rng& rng) {
  constexpr int classes = 4;
  fs::create_directories(dir);
  const auto big_endian = [](std::string& bytes, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  const auto write = [&](const std::string& prefix, std::uint32_t count) {
    std::string images, labels;
    for (std::uint32_t v : {0x803u, count, 28u, 28u}) big_endian(images, v);
    for (std::uint32_t v : {0x801u, count}) big_endian(labels, v);
    for (std::uint32_t i = 0; i < count; ++i) {
      const int label = static_cast<int>(i % classes);
      labels.push_back(static_cast<char>(label));
      for (int p = 0; p < 28 * 28; ++p) images.push_back(static_cast<char>(pixel(rng, label, 0)));
    }
    for (const auto& [name, bytes] : {std::pair{prefix + "-images-idx3-ubyte", &images},
                                      std::pair{prefix + "-labels-idx1-ubyte", &labels}})
      ptrain::io::write_atomically(dir / name, [&](std::ostream& out) {
        out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
      });
  };
  write("train", 128);
  write("t10k", 64);
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
    fashion_mnist(root / "fashion_mnist", rng);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_example_data: %s\n", e.what());
    return 1;
  }
  return 0;
}
