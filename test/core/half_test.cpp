#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/core/half.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(half_test)

using ptrain::bfloat16;  // beside the global one of OpenBLAS's cblas.h, where a kernel header includes it

namespace {

template <class T>
std::uint16_t bits(T x) {
  std::uint16_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
template <class T>
T from_bits(std::uint16_t b) {
  T x;
  std::memcpy(static_cast<void*>(&x), &b, sizeof b);
  return x;
}
std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Floats that exercise rounding: every exponent, ties, neighbours of ties, subnormals of both
// the source and the target, overflow, infinities and NaNs (of both signs).
std::vector<float> tricky_floats() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f,
                          5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 6.1035156e-5f, 1e-40f, -1e-45f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::min()};
  for (std::uint32_t u = 0; u < 0xffffffffu - 40503u; u += 40503u) {  // about 106,000 patterns
    float f;
    std::memcpy(&f, &u, sizeof f);
    v.push_back(f);
  }
  // Around the rounding points of both targets, with an even and an odd last kept bit.
  for (std::uint32_t e = 0; e < 256; ++e)
    for (std::uint32_t high : {0x2a0000u, 0x2b0000u, 0x2a6000u, 0x2a4000u})
      for (std::uint32_t low : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
        const std::uint32_t u = (e << 23) | high | low;
        float f;
        std::memcpy(&f, &u, sizeof f);
        v.push_back(f);
        v.push_back(-f);
      }
  return v;
}

template <class T>
void check_matches_eigen_scalar_casts() {
  // Every 16-bit pattern to float.
  std::vector<T> all(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) all[b] = from_bits<T>(static_cast<std::uint16_t>(b));
  std::vector<float> widened(all.size());
  convert(std::span<const T>(all), std::span<float>(widened));
  std::size_t misses = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const float expected = static_cast<float>(all[i]);
    if (!(float_bits(widened[i]) == float_bits(expected) || (std::isnan(widened[i]) && std::isnan(expected))))
      ++misses;
  }
  BOOST_TEST(misses == 0u, scalar_name<T> << " to float: " << misses << " of 65536 patterns differ from Eigen");

  // Floats to T, lengths that are not a multiple of the vector width included.
  const auto floats = tricky_floats();
  for (std::size_t n : {floats.size(), std::size_t{1}, std::size_t{7}, std::size_t{9}, std::size_t{0}}) {
    std::vector<T> narrowed(n);
    convert(std::span<const float>(floats.data(), n), std::span<T>(narrowed));
    misses = 0;
    std::size_t first = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const T expected = static_cast<T>(floats[i]);
      const bool same = bits(narrowed[i]) == bits(expected) ||
                        (std::isnan(static_cast<float>(narrowed[i])) && std::isnan(static_cast<float>(expected)));
      if (!same && misses++ == 0) first = i;
    }
    std::ostringstream report;
    if (misses)
      report << "float to " << scalar_name<T> << ": " << misses << " of " << n << " differ, first " << floats[first]
             << " -> " << bits(narrowed[first]) << " instead of " << bits(static_cast<T>(floats[first]));
    BOOST_TEST(misses == 0u, report.str());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(types_are_16_bit_and_accumulate_in_float) {
  static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);
  static_assert(std::is_same_v<accumulate_t<half>, float>);
  static_assert(std::is_same_v<accumulate_t<bfloat16>, float>);
  static_assert(std::is_same_v<accumulate_t<double>, double>);
  static_assert(is_reduced_float_v<half> && is_reduced_float_v<bfloat16> && !is_reduced_float_v<float>);
  BOOST_TEST(std::string(scalar_name<half>) == "float16");
  BOOST_TEST(static_cast<float>(half(1.0f) + half(2.0f)) == 3.0f);
  BOOST_TEST(bits(half(1.0f)) == 0x3c00u);
  BOOST_TEST(bits(bfloat16(1.0f)) == 0x3f80u);
}

BOOST_AUTO_TEST_CASE(half_conversions_match_eigens_scalar_casts_bit_for_bit) {
  check_matches_eigen_scalar_casts<half>();
}

BOOST_AUTO_TEST_CASE(bfloat16_conversions_match_eigens_scalar_casts_bit_for_bit) {
  check_matches_eigen_scalar_casts<bfloat16>();
}

BOOST_AUTO_TEST_CASE(other_conversions_are_static_casts) {
  const std::vector<double> d{1.5, -2.25, 1e300};
  std::vector<float> f(3);
  convert(std::span<const double>(d), std::span<float>(f));
  BOOST_TEST(f[0] == 1.5f);
  BOOST_TEST(f[1] == -2.25f);
  BOOST_TEST(std::isinf(f[2]));
  std::vector<half> h(3);
  convert(std::span<const double>(d), std::span<half>(h));
  BOOST_TEST(static_cast<float>(h[1]) == -2.25f);
}

BOOST_AUTO_TEST_CASE(sizes_must_match) {
  std::vector<float> f(4);
  std::vector<half> h(3);
  BOOST_CHECK_EXCEPTION(convert(std::span<const float>(f), std::span<half>(h)), Error, [](const Error& e) {
    return std::string(e.what()) ==
           "convert from float32 to float16: 4 source elements but 3 destination elements";
  });
}

BOOST_AUTO_TEST_SUITE_END()
