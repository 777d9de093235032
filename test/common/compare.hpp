#pragma once
// Comparisons the tests share.
#include <algorithm>
#include <cmath>

#include <boost/test/unit_test.hpp>

#include <ptrain/tensor/tensor.hpp>

namespace ptrain::test {

// Worst |got - expected| / max(1, |expected|).
template <class T>
double worst_error(const Tensor<T>& got, const Tensor<T>& expected) {
  BOOST_REQUIRE(got.shape() == expected.shape());
  double worst = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double e = static_cast<double>(expected[i]);
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - e) / std::max(1.0, std::abs(e)));
  }
  return worst;
}

}  // namespace ptrain::test
