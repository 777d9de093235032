#pragma once
// What the tests share: comparisons, the deterministic inputs that PyTorch reference numbers are
// computed from, float copies of double tensors, and the message of an expected error.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/tensor/tensor.hpp>

namespace ptrain::test {

// Worst |got - expected| / max(1, |expected|); got may be float against a double reference.
template <class T, class U>
double worst_error(const Tensor<T>& got, const Tensor<U>& expected) {
  BOOST_REQUIRE(got.shape() == expected.shape());
  double worst = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double e = static_cast<double>(expected[i]);
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - e) / std::max(1.0, std::abs(e)));
  }
  return worst;
}

// scale * sin(a * i + b) (or cos) over the flattened tensor: in Python,
// scale * torch.sin(a * torch.arange(n, dtype=torch.float64) + b).reshape(shape).
inline Tensor<double> sequence(const Shape& shape, double a, double b, double scale = 1.0, bool cosine = false) {
  Tensor<double> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t[i] = scale * (cosine ? std::cos(a * static_cast<double>(i) + b) : std::sin(a * static_cast<double>(i) + b));
  return t;
}

// Every element within tol of the reference, each failure named.
inline void check_close(const Tensor<double>& got, const std::vector<double>& expected, double tol) {
  BOOST_REQUIRE_EQUAL(got.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::int64_t i = 0; i < got.numel(); ++i)
    BOOST_TEST(std::abs(got[i] - expected[static_cast<std::size_t>(i)]) <= tol,
               "element " << i << ": got " << got[i] << ", expected " << expected[static_cast<std::size_t>(i)]);
}

inline Tensor<float> to_float(const Tensor<double>& t) {
  Tensor<float> f(t.shape());
  for (std::int64_t i = 0; i < t.numel(); ++i) f[i] = static_cast<float>(t[i]);
  return f;
}

// The what() of the Error that f throws, or "no error".
inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace ptrain::test
