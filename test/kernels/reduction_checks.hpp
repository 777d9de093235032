#pragma once
// What the reduction kernel tests share: inputs rounded to the scalar type, tolerances per type, and
// an element-by-element comparison of an executor's result with the CPU kernel's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/core/half.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/tensor/tensor.hpp>

namespace ptrain::test {

// Relative tolerance: double tight; float a few ulps of sums over hundreds of terms; half and
// bfloat16 about two units of their last place (both sides are float math rounded once).
template <class T>
constexpr double reduction_tolerance = std::is_same_v<T, double>  ? 1e-12
                                       : std::is_same_v<T, float> ? 1e-5
                                       : std::is_same_v<T, half>  ? 2e-3
                                                                  : 8e-3;

// n values uniform in [lo, hi) rounded to T.
template <class T>
std::vector<T> uniform_values(std::int64_t n, std::uint64_t seed, double lo = -2, double hi = 2) {
  Rng rng(seed);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<T>(rng.uniform(lo, hi));
  return v;
}

// Every element of got within tol * max(1, |want|) of want; the first failure named.
template <class A, class B>
void expect_close(const A* got, const B* want, std::int64_t n, double tol, const std::string& what) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (!(std::abs(g - w) <= tol * std::max(1.0, std::abs(w)))) {
      BOOST_ERROR(what << ": element " << i << " of " << n << " is " << g << ", expected " << w);
      return;
    }
  }
}
template <class A, class B>
void expect_close(const std::vector<A>& got, const std::vector<B>& want, double tol, const std::string& what) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  expect_close(got.data(), want.data(), static_cast<std::int64_t>(got.size()), tol, what);
}

}  // namespace ptrain::test
