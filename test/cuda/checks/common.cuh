#pragma once
// What the device checks share: a tally of failures, inputs drawn from a seed, and comparisons of
// a device result with the host's.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <ptrain/cuda.hpp>

namespace ptrain::device_checks {

inline int& failures() {
  static int count = 0;
  return count;
}

inline void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures();
}

template <class T>
Tensor<T> signed_values(const Shape& shape, std::uint64_t seed, double low = -2.0, double high = 2.0) {
  Rng rng(seed);
  Tensor<T> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<T>(rng.uniform(low, high));
  return t;
}

// Index of the first element differing by more than tol (absolute), or -1.
template <class T>
std::int64_t first_mismatch(const std::vector<T>& got, const Tensor<T>& want, double tol) {
  if (static_cast<std::int64_t>(got.size()) != want.numel()) return 0;
  for (std::int64_t i = 0; i < want.numel(); ++i)
    if (!(std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])) <= tol)) return i;
  return -1;
}

// A device tensor's elements equal a host tensor's within tol.
template <class T>
void expect_close(const Tensor<T, Cuda>& got, const Tensor<T>& want, double tol, const std::string& what) {
  const std::int64_t at = first_mismatch(got.to_vector(), want, tol);
  expect(at < 0, what + (at < 0 ? "" : " (first mismatch at element " + std::to_string(at) + ")"));
}

}  // namespace ptrain::device_checks
