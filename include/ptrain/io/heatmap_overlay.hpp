#pragma once
// A map of values in [0, 1] drawn over an RGB image in the jet colour map (blue low, red high), as
// pytorch-grad-cam's show_cam_on_image draws a class activation map: the map quantised to 256
// levels and coloured by MATLAB's/Octave's jet (OpenCV's COLORMAP_JET), blended with the image at
// image_weight, and the blend divided by its largest value. Images are [3, H, W] floats in [0, 1]
// (io/pixels.hpp's to_tensor; to_image makes the result pixels).
#include <algorithm>
#include <array>
#include <cmath>

#include "ptrain/core/error.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::io {

// jet at x in [0, 1]: red, green, blue in [0, 1].
inline std::array<float, 3> jet(float x) {
  const auto ramp = [x](float shift) { return std::clamp(1.5f - std::fabs(4.0f * x - shift), 0.0f, 1.0f); };
  return {ramp(3.0f), ramp(2.0f), ramp(1.0f)};
}

inline Tensor<float> heatmap_overlay(const Tensor<float>& rgb, const Tensor<float>& map, float image_weight = 0.5f) {
  check(rgb.rank() == 3 && rgb.size(0) == 3, "heatmap_overlay: expected an RGB image [3, H, W], got ", rgb.shape());
  check(map.rank() == 2 && map.size(0) == rgb.size(1) && map.size(1) == rgb.size(2), "heatmap_overlay: a map ",
        map.shape(), " over an image ", rgb.shape(), "; expected [H, W] of the image's size");
  check(image_weight >= 0.0f && image_weight <= 1.0f, "heatmap_overlay: image_weight ", image_weight,
        " is outside [0, 1]");
  const std::int64_t plane = map.numel();
  Tensor<float> out(rgb.shape());
  float largest = 0.0f;
  for (std::int64_t i = 0; i < plane; ++i) {
    const float level = std::floor(255.0f * std::clamp(map[i], 0.0f, 1.0f)) / 255.0f;
    const auto colour = jet(level);
    for (std::int64_t c = 0; c < 3; ++c) {
      const float v = (1.0f - image_weight) * colour[static_cast<std::size_t>(c)] + image_weight * rgb[c * plane + i];
      out[c * plane + i] = v;
      largest = std::max(largest, v);
    }
  }
  if (largest > 0.0f)
    for (std::int64_t i = 0; i < out.numel(); ++i) out[i] /= largest;
  return out;
}

}  // namespace ptrain::io
