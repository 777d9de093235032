#pragma once
// A small learnable dataset for the training-loop tests: n examples of `features` normal values,
// the first shifted by the class (k classes), fixed by the seed.
#include <cstdint>
#include <vector>

#include <ptrain/core/rng.hpp>
#include <ptrain/data/dataset.hpp>

namespace ptrain::test {

inline TensorDataset class_blobs(std::int64_t n, int classes, int features = 4, std::uint64_t seed = 3) {
  Rng rng(seed);
  Tensor<float> x({n, features});
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    y.push_back(static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes))));
    const double shift = 3.0 * static_cast<double>(y.back()) / (classes - 1) - 1.5;
    for (int j = 0; j < features; ++j) x[features * i + j] = static_cast<float>(rng.normal(j == 0 ? shift : 0, 1));
  }
  return {x, y};
}

}  // namespace ptrain::test
