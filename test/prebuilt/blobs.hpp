#pragma once
// The data of test/prebuilt's programs: two Gaussian blobs in the plane, around (-1, -1) (label 0)
// and (1, 1) (label 1), which a small MLP learns in a few epochs.
#include <cstdint>
#include <vector>

#include <ptrain/ptrain.hpp>

namespace prebuilt_test {

// count points per class, alternating labels.
inline ptrain::TensorDataset blobs(std::int64_t count, std::uint64_t seed) {
  ptrain::Rng rng(seed);
  std::vector<float> points;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < 2 * count; ++i) {
    const std::int64_t label = i % 2;
    const float centre = label == 0 ? -1.0f : 1.0f;
    points.push_back(centre + 0.5f * static_cast<float>(rng.normal()));
    points.push_back(centre + 0.5f * static_cast<float>(rng.normal()));
    labels.push_back(label);
  }
  return ptrain::TensorDataset(ptrain::Tensor<float>::from({2 * count, 2}, points), labels);
}

inline std::shared_ptr<ptrain::Sequential<float>> mlp() {
  return std::make_shared<ptrain::Sequential<float>>(std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{
      std::make_shared<ptrain::Linear<float>>(2, 16), std::make_shared<ptrain::ReLU<float>>(),
      std::make_shared<ptrain::Linear<float>>(16, 2)});
}

// Whether a run learned the blobs: the last epoch's training loss under 0.2 and half the first's,
// and the validation loss under 0.2.
inline bool learned(const std::vector<ptrain::EpochResult>& results, int epochs, double val_loss) {
  return static_cast<int>(results.size()) == epochs && results.back().train_loss < 0.2 &&
         results.back().train_loss < 0.5 * results.front().train_loss && val_loss < 0.2;
}

}  // namespace prebuilt_test
