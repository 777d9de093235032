#pragma once
// The pixels of the examples' tiny datasets: random but learnable, each class with its own mean
// colour (channel c of class k centred on one of ten levels between 40 and 210).
#include <cstdint>

#include <ptrain/core/rng.hpp>

namespace example_data {

inline std::uint8_t clamp_byte(double v) { return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

inline double class_mean(int label, int channel) { return 40.0 + 170.0 * ((label * 3 + channel) % 10) / 9.0; }

inline std::uint8_t pixel(ptrain::Rng& rng, int label, int channel) {
  return clamp_byte(class_mean(label, channel) + 10.0 * rng.normal());
}

}  // namespace example_data
