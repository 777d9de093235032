#pragma once
// Tiny data for the inception_retinopathy and unet_segmentation smoke tests, in the projects'
// formats: Kaggle's trainLabels.csv + train/*.jpeg fundus images with an Inception v3 state dict,
// and microscopy images/*.png with binary 0/255 masks/*.png matched by file name.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/core/rng.hpp>
#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/io/atomic_file.hpp>
#include <ptrain/io/image.hpp>
#include <ptrain/models/inception.hpp>
#include <ptrain/nn/state_dict.hpp>

#include "class_pixels.hpp"

namespace example_data {

namespace fs = std::filesystem;

// Moves the running statistics of every batch norm towards those of `inputs` (forwards in training
// mode), so that the random backbone gives the smoke tests finite validation losses in eval mode
// as a trained one would.
template <class Model>
void calibrate_batch_norm(Model& model, const std::vector<ptrain::Tensor<float>>& inputs) {
  ptrain::Tensor<float> batch(ptrain::Shape{static_cast<std::int64_t>(inputs.size()), 3, 80, 80});
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (std::int64_t k = 0; k < inputs[i].numel(); ++k) batch.data()[i * inputs[i].numel() + k] = 2 * inputs[i][k] - 1;
  ptrain::NoGradGuard no_grad;
  model.train();
  for (const auto& [name, child] : model.children())
    if (name == "AuxLogits") child->eval();  // torchvision's aux head needs 299x299 inputs
  for (int pass = 0; pass < 20; ++pass) model.forward(ptrain::Var<float>(batch));
}

// DIR/trainLabels.csv (image,level) and DIR/train/<n>_left|right.jpeg: 96x96 discs on black, each
// level (0-4) its own hue with as many bright spots as three times the level, so that a head over
// the random backbone learns the levels in a few epochs;
// DIR/bad_labels.csv names an image that does not exist, DIR/header_only_labels.csv none; DIR/caches/ is emptied; DIR/inception_v3.safetensors is a
// seeded torchvision-shaped Inception v3 (1000 classes, aux head) in F16.
inline void retina(const fs::path& dir) {
  ptrain::Rng rng(7);
  fs::create_directories(dir / "train");
  fs::remove_all(dir / "caches");  // the smoke tests' tensor caches: written afresh by each run
  fs::create_directories(dir / "caches");
  constexpr int size = 96, images = 40, levels = 5;
  // Hues far apart: a head over random features tells them apart, brightness alone it does not.
  constexpr double level_colour[levels][3] = {{220, 60, 50}, {50, 200, 60}, {60, 70, 220}, {210, 200, 50}, {60, 200, 210}};
  std::string csv = "image,level\n";
  std::vector<ptrain::Tensor<float>> inputs;  // one per level at 80x80, for the backbone's statistics
  for (int n = 0; n < images; ++n) {
    const int level = n % levels;
    const std::string name = std::to_string(10 + n / 2) + (n % 2 ? "_right" : "_left");
    ptrain::io::Image image(size, size, 3);
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        const double dx = x - size / 2.0, dy = y - size / 2.0;
        const bool inside = dx * dx + dy * dy < 40.0 * 40.0;
        for (int c = 0; c < 3; ++c)
          image.at(y, x, c) = clamp_byte(inside ? level_colour[level][c] + 10 * rng.normal() : 3 * rng.uniform());
      }
    for (int s = 0; s < 3 * level; ++s) {
      const auto cy = static_cast<int>(24 + rng.below(48)), cx = static_cast<int>(24 + rng.below(48));
      for (int y = cy - 2; y <= cy + 2; ++y)
        for (int x = cx - 2; x <= cx + 2; ++x)
          image.at(y, x, 0) = 255, image.at(y, x, 1) = 240, image.at(y, x, 2) = 120;
    }
    ptrain::io::write_jpeg(dir / "train" / (name + ".jpeg"), image, 90);
    if (n < levels) inputs.push_back(ptrain::resize_bilinear(ptrain::io::to_tensor(image), 80, 80));
    csv += name + "," + std::to_string(level) + "\n";
  }
  const auto write_text = [](const fs::path& path, const std::string& text) {
    ptrain::io::write_atomically(path, [&](std::ostream& out) { out << text; });
  };
  write_text(dir / "trainLabels.csv", csv);
  write_text(dir / "bad_labels.csv", "image,level\n10_left,0\n99_missing,3\n");
  write_text(dir / "header_only_labels.csv", "image,level\n");

  const auto start = std::chrono::steady_clock::now();
  ptrain::manual_seed(2015);
  auto backbone = ptrain::inception_v3<float>();
  calibrate_batch_norm(*backbone, inputs);
  ptrain::save_state_dict(*backbone, dir / "inception_v3.safetensors", ptrain::io::Dtype::F16);
  std::printf("make_example_data: inception_v3.safetensors (%lld parameters, F16) in %.1f s\n",
              static_cast<long long>(backbone->parameter_count()),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// DIR/images/cell_<k>.png (64x64 gray) and DIR/masks/cell_<k>.png (0/255): bright blobs on a
// dark, noisy background; the mask is 255 inside the blobs.
inline void cells(const fs::path& dir) {
  ptrain::Rng rng(11);
  fs::create_directories(dir / "images");
  fs::create_directories(dir / "masks");
  constexpr int size = 64, pairs = 6;
  for (int k = 0; k < pairs; ++k) {
    ptrain::io::Image image(size, size, 1), mask(size, size, 1);
    const int blobs = 3 + static_cast<int>(rng.below(3));
    double cy[5], cx[5], r[5];
    for (int b = 0; b < blobs; ++b) cy[b] = rng.uniform(8, 56), cx[b] = rng.uniform(8, 56), r[b] = rng.uniform(4, 10);
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        bool cell = false;
        for (int b = 0; b < blobs; ++b)
          cell = cell || (y - cy[b]) * (y - cy[b]) + (x - cx[b]) * (x - cx[b]) < r[b] * r[b];
        image.at(y, x, 0) = clamp_byte((cell ? 170 : 50) + 20 * rng.normal());
        mask.at(y, x, 0) = cell ? 255 : 0;
      }
    const std::string name = "cell_" + std::to_string(k) + ".png";
    ptrain::io::write_png(dir / "images" / name, image);
    ptrain::io::write_png(dir / "masks" / name, mask);
  }
}

}  // namespace example_data
