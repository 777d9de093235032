#pragma once
// What the spatial kernel tests (conv, pool, upsample) share: seeded inputs in any scalar type,
// outputs poisoned with NaN so an element left unwritten fails, and the error of an executor's
// result against the CPU kernel's, scaled by the reference's magnitude.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/core/half.hpp>
#include <ptrain/tensor/tensor.hpp>

namespace ptrain::test {

// 1e-12 for double, 1e-5 for float; the 16-bit types round the GEMM's results (and a chunk's
// weight-gradient sums) where the CPU kernels round once.
template <class T>
constexpr double spatial_tolerance = std::is_same_v<T, double>   ? 1e-12
                                     : std::is_same_v<T, float>  ? 1e-5
                                     : std::is_same_v<T, half>   ? 1e-2
                                                                 : 5e-2;

template <class T>
Tensor<T> seeded(const Shape& shape, std::uint64_t seed) {
  return tensor_cast<T>(random_tensor(shape, seed));
}

template <class T>
Tensor<T> poisoned(const Shape& shape) {
  return tensor_cast<T>(Tensor<double>::full(shape, std::numeric_limits<double>::quiet_NaN()));
}

// max |got - want| / max(1, max |want|); infinite when an element is NaN in one and not the other.
template <class T>
double scaled_error(const Tensor<T>& got, const Tensor<T>& want) {
  if (got.shape() != want.shape()) return std::numeric_limits<double>::infinity();
  const Tensor<double> a = tensor_cast<double>(got), b = tensor_cast<double>(want);
  double worst = 0, scale = 1;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    if (std::isnan(a[i])) continue;
    worst = std::max(worst, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return worst / scale;
}

template <class T>
void expect_close(const Tensor<T>& got, const Tensor<T>& want, const std::string& what) {
  const double error = scaled_error(got, want);
  BOOST_TEST(error <= spatial_tolerance<T>, what << ": error " << error);
}

}  // namespace ptrain::test
