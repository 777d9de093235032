#pragma once
// Example tensors with a known value at every position, for the transform tests.
#include <cmath>
#include <cstdint>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/tensor/tensor.hpp>

namespace ptrain::test {

// [C, H, W] with element (c, h, w) = value(c, h, w).
template <class F>
Tensor<float> ramp_by(std::int64_t c, std::int64_t h, std::int64_t w, F value) {
  Tensor<float> t(Shape{c, h, w});
  for (std::int64_t i = 0; i < c; ++i)
    for (std::int64_t j = 0; j < h; ++j)
      for (std::int64_t k = 0; k < w; ++k) t[(i * h + j) * w + k] = value(i, j, k);
  return t;
}

// ((31 c + 7 h + 3 w) mod 11) / 10: the input of the torch and torchvision references.
inline Tensor<float> reference_ramp(std::int64_t c, std::int64_t h, std::int64_t w) {
  return ramp_by(c, h, w, [](std::int64_t i, std::int64_t j, std::int64_t k) {
    return static_cast<float>((31 * i + 7 * j + 3 * k) % 11) / 10.0f;
  });
}

// Every element within 1e-6 of the reference (float computations against torch's).
inline void check_close(const Tensor<float>& got, const std::vector<float>& expected) {
  BOOST_REQUIRE_EQUAL(got.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const float g = got[static_cast<std::int64_t>(i)];
    BOOST_TEST(std::abs(g - expected[i]) <= 1e-6f, "element " << i << ": got " << g << ", expected " << expected[i]);
  }
}

}  // namespace ptrain::test
