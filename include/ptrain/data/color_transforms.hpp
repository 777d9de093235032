#pragma once
// Photometric transforms of [C, H, W] examples in [0, 1] (apply them before Normalize): contrast
// as torchvision's adjust_contrast and ColorJitter(contrast=...). They leave target maps alone.
#include <algorithm>
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/data/transforms.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

// Blends x with the mean of its grayscale image (0.2989 R + 0.587 G + 0.114 B for 3 channels, the
// channel itself for 1): clamp(factor * x + (1 - factor) * mean, 0, 1). Factor 0 gives flat grey,
// 1 the image unchanged.
inline void adjust_contrast(Tensor<float>& x, float factor) {
  detail::require_chw(x, "adjust_contrast");
  const std::int64_t c = x.size(0), plane = x.size(1) * x.size(2);
  check(c == 1 || c == 3, "adjust_contrast: expected 1 or 3 channels, got shape ", x.shape());
  check(factor >= 0.0f, "adjust_contrast: expected a non-negative factor, got ", factor);
  float* p = x.data();
  double sum = 0.0;
  for (std::int64_t i = 0; i < plane; ++i)
    sum += c == 1 ? p[i] : 0.2989f * p[i] + 0.587f * p[plane + i] + 0.114f * p[2 * plane + i];
  const float mean = plane ? static_cast<float>(sum / static_cast<double>(plane)) : 0.0f;
  const float offset = (1.0f - factor) * mean;
  for (std::int64_t i = 0; i < c * plane; ++i) p[i] = std::clamp(factor * p[i] + offset, 0.0f, 1.0f);
}

// ColorJitter(contrast=strength): a factor drawn uniformly from [max(0, 1 - strength), 1 + strength].
class RandomContrast {
 public:
  explicit RandomContrast(double strength) : RandomContrast(std::max(0.0, 1.0 - strength), 1.0 + strength) {
    check(strength >= 0.0, "RandomContrast: expected a non-negative strength, got ", strength);
  }
  RandomContrast(double lowest, double highest) : lowest_(lowest), highest_(highest) {
    check(lowest >= 0.0 && lowest <= highest, "RandomContrast: expected 0 <= lowest <= highest, got ", lowest, " and ",
          highest);
  }
  void operator()(Tensor<float>& x, Rng& rng) const {
    adjust_contrast(x, static_cast<float>(rng.uniform(lowest_, highest_)));
  }

 private:
  double lowest_, highest_;
};

}  // namespace ptrain
