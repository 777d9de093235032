#pragma once
// What the tests share: comparisons, the deterministic inputs that PyTorch reference numbers are
// computed from, float copies of double tensors, and the message of an expected error.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/core/half.hpp>
#include <ptrain/tensor/tensor.hpp>

namespace ptrain::test {

// Tolerances that hold on every host are derived from error bounds: the vector width (SSE, AVX2,
// AVX-512) changes the order of a sum and whether a * b + c is one fused multiply-add, and with
// them the last bits of a result; how many bits depends on the data's conditioning.

// Machine epsilon of the arithmetic a kernel in T does (float for half and bfloat16).
template <class T>
constexpr double arithmetic_epsilon = std::numeric_limits<accumulate_t<T>>::epsilon();

// How normalising each channel of x ([outer, channels, inner]) by its mean and standard deviation
// amplifies rounding. condition = max over channels of max|x| / std: evaluated as
// y = x * a + b with a = w / std and b = bias - mean * a, the terms x * a and b reach
// condition * |w| while y is about |w| (they cancel when |mean| >> std). Rounding a, b and the
// product x * a, or fusing x * a + b into one FMA, each moves y by up to eps / 2 * condition * |w|:
// two evaluations differ by at most normalisation_error(condition, |w|) = 3 * eps * condition * |w|
// beyond the rounding of y itself. smallest_std scales the input gradient, w * gy / std.
struct Conditioning {
  double condition = 0, smallest_std = std::numeric_limits<double>::infinity();
};
template <class T>
Conditioning channel_conditioning(const std::vector<T>& x, std::int64_t outer, std::int64_t channels,
                                  std::int64_t inner) {
  Conditioning k;
  std::vector<double> v;
  for (std::int64_t c = 0; c < channels; ++c) {
    v.clear();
    for (std::int64_t n = 0; n < outer; ++n)
      for (std::int64_t i = 0; i < inner; ++i)
        v.push_back(static_cast<double>(x[static_cast<std::size_t>((n * channels + c) * inner + i)]));
    double sum = 0, sum_sq = 0, largest = 0;
    for (double e : v) sum += e, largest = std::max(largest, std::abs(e));
    const double mean = sum / static_cast<double>(v.size());
    for (double e : v) sum_sq += (e - mean) * (e - mean);
    const double deviation = std::sqrt(sum_sq / static_cast<double>(v.size()));
    if (deviation == 0) continue;  // a constant channel normalises to the bias alone: nothing is amplified
    k.condition = std::max(k.condition, largest / deviation);
    k.smallest_std = std::min(k.smallest_std, deviation);
  }
  return k;
}
template <class T>
double normalisation_error(double condition, double scale) {
  return 3 * arithmetic_epsilon<T> * condition * scale;
}

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
