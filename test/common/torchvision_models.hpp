#pragma once
// Checks of the model zoo against torchvision 0.14: parameter names and shapes against the lists
// in test/nn/data/<model>_names.txt, and deterministic weights and inputs that
// test/nn/data/make_zoo_references.py fills the same way, so outputs can be compared with PyTorch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/nn/module.hpp>

#include "source_dir.hpp"

namespace ptrain::test {

// test/nn/data/<file>, found from this header's own path.
inline std::filesystem::path zoo_data(const std::string& file) {
  return test_source("nn/data") / file;
}

// Every parameter's name and shape, in order, equals the list's line `name d0,d1,...`.
template <class T>
void expect_torchvision_parameters(const Module<T>& model, const std::string& list_file) {
  const std::filesystem::path path = zoo_data(list_file);
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << path);
  std::vector<std::string> expected;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) expected.push_back(line);
  const auto named = model.named_parameters();
  BOOST_TEST(named.size() == expected.size(),
             path.filename() << ": " << named.size() << " parameters, torchvision has " << expected.size());
  int reported = 0;
  for (std::size_t i = 0; i < std::min(named.size(), expected.size()) && reported < 5; ++i) {
    std::ostringstream got;
    got << named[i].first << ' ';
    const Shape& shape = named[i].second.shape();
    for (int d = 0; d < shape.rank(); ++d) got << (d ? "," : "") << shape[d];
    if (got.str() == expected[i]) continue;
    ++reported;
    BOOST_ERROR(path.filename() << " line " << i + 1 << ": expected '" << expected[i] << "', got '" << got.str()
                                << "'");
  }
}

// Parameter k (in named order), element j: s = sin(0.37 j + 1.3 k); weights of rank >= 2 get
// 2 s / sqrt(fan_in) (He-like scale keeps deep activations in range), other weights (batch norm)
// 1 + 0.1 s, biases 0.1 s.
template <class T>
void fill_deterministic(const Module<T>& model) {
  int k = 0;
  for (auto& [name, p] : model.named_parameters()) {
    Tensor<T>& v = p.value();
    const bool matrix = v.rank() >= 2;
    const bool weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
    const double scale = matrix ? 2.0 / std::sqrt(static_cast<double>(v.numel() / v.size(0))) : 0.1;
    for (std::int64_t j = 0; j < v.numel(); ++j) {
      const double s = std::sin(0.37 * static_cast<double>(j) + 1.3 * k);
      v[j] = static_cast<T>(matrix ? scale * s : (weight ? 1.0 : 0.0) + scale * s);
    }
    ++k;
  }
}

// n uniforms in [0, 1): splitmix64 of stream * 2^32 + j, its top 53 bits (make_conv_accuracy_reference.py's
// uniform).
inline std::vector<double> seeded_uniform(std::uint64_t stream, std::int64_t n) {
  std::vector<double> u(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    std::uint64_t z = (stream << 32) + static_cast<std::uint64_t>(j);
    z *= 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    u[static_cast<std::size_t>(j)] = static_cast<double>(z >> 11) * 0x1p-53;
  }
  return u;
}

// Parameters and batch-norm statistics as a trained network could have them, drawn as
// make_conv_accuracy_reference.py draws them: parameter k (named order) from seeded_uniform(k): rank >= 2
// weights (2u - 1) sqrt(6 / fan_in), other weights 1 + 0.2 (2u - 1), biases 0.1 (2u - 1); the k-th
// running mean 0.3 (2u - 1) from stream 1000 + k, the k-th running variance 0.5 + u from 2000 + k;
// each rounded to float (PyTorch fills a float model), so a double model holds the same numbers.
template <class T>
void fill_seeded(Module<T>& model) {
  const auto fill = [](Tensor<T>& v, std::uint64_t stream, auto&& value) {
    const std::vector<double> u = seeded_uniform(stream, v.numel());
    for (std::int64_t j = 0; j < v.numel(); ++j)
      v[j] = static_cast<T>(static_cast<float>(value(u[static_cast<std::size_t>(j)])));
  };
  std::uint64_t k = 0;
  for (auto& [name, p] : model.named_parameters()) {
    Tensor<T>& v = p.value();
    const double bound = std::sqrt(6.0 / static_cast<double>(v.numel() / v.size(0)));
    const bool weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
    fill(v, k++, [&](double u) { return v.rank() >= 2 ? (2 * u - 1) * bound : weight ? 1 + 0.2 * (2 * u - 1) : 0.1 * (2 * u - 1); });
  }
  std::uint64_t means = 0, variances = 0;
  for (auto& [name, buffer] : model.named_buffers()) {
    if (name.ends_with("running_mean")) fill(*buffer, 1000 + means++, [](double u) { return 0.3 * (2 * u - 1); });
    if (name.ends_with("running_var")) fill(*buffer, 2000 + variances++, [](double u) { return 0.5 + u; });
  }
}

// x[i] = sin(0.011 i) over the flat tensor.
inline Tensor<float> deterministic_input(const Shape& shape) {
  Tensor<float> x(shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(std::sin(0.011 * static_cast<double>(i)));
  return x;
}

// The first logits of one image against PyTorch's, within 1e-4 of the largest.
inline void expect_logits(const Tensor<float>& got, const std::vector<float>& expected) {
  BOOST_REQUIRE(got.numel() >= static_cast<std::int64_t>(expected.size()));
  double largest = 0;
  for (float e : expected) largest = std::max(largest, static_cast<double>(std::abs(e)));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const float g = got[static_cast<std::int64_t>(i)];
    BOOST_TEST(std::abs(g - expected[i]) <= 1e-4 * largest,
               "logit " << i << ": got " << g << ", PyTorch " << expected[i]);
  }
}

}  // namespace ptrain::test
