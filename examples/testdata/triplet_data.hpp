#pragma once
// Tiny data for the triplet_transfer smoke tests: DIR/triplets.csv (image,instrument,verb,target)
// and DIR/frames/<n>.png, 32x32 frames whose red, green and blue levels tell the instrument (3
// classes), the verb (3) and the target (2) apart, each combination six times; and
// DIR/squeezenet1_1.safetensors, a seeded torchvision-shaped SqueezeNet 1.1 (1000 classes) in F16
// that stands in for ImageNet weights (its classifier is what the example must skip).
#include <cstdint>
#include <filesystem>
#include <string>

#include <ptrain/core/rng.hpp>
#include <ptrain/io/atomic_file.hpp>
#include <ptrain/io/image.hpp>
#include <ptrain/models/squeezenet.hpp>
#include <ptrain/nn/state_dict.hpp>

#include "class_pixels.hpp"

namespace example_data {

inline void triplet(const std::filesystem::path& dir) {
  ptrain::Rng rng(11);
  std::filesystem::create_directories(dir / "frames");
  constexpr int size = 32, frames = 108;
  constexpr int classes[3] = {3, 3, 2};
  std::string csv = "image,instrument,verb,target\n";
  for (int n = 0; n < frames; ++n) {
    const int labels[3] = {n % 3, (n / 3) % 3, (n / 9) % 2};
    ptrain::io::Image image(size, size, 3);
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x)
        for (int c = 0; c < 3; ++c)
          image.at(y, x, c) = clamp_byte(40.0 + 170.0 * labels[c] / (classes[c] - 1) + 12.0 * rng.normal());
    const std::string name = "frames/" + std::to_string(n) + ".png";
    ptrain::io::write_png(dir / name, image);
    csv += name + "," + std::to_string(labels[0]) + "," + std::to_string(labels[1]) + "," + std::to_string(labels[2]) + "\n";
  }
  ptrain::io::write_atomically(dir / "triplets.csv", [&](std::ostream& out) { out << csv; });
  ptrain::manual_seed(5);
  ptrain::save_state_dict(*ptrain::squeezenet1_1<float>(), dir / "squeezenet1_1.safetensors", ptrain::io::Dtype::F16);
}

}  // namespace example_data
