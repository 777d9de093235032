#pragma once
// What the parity tests share: the reference files PyTorch's generators wrote (test/nn/data), and
// a comparison of a tensor with PyTorch's within 1e-4 relative.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/tensor/tensor.hpp>

#include "device_mlp.hpp"  // relative_difference

#include "source_dir.hpp"

namespace ptrain::test {

inline std::filesystem::path reference_file(const std::string& file) {
  return test_source("nn/data") / file;
}

inline void expect_close(const Tensor<float>& got, const Tensor<float>& want, const std::string& what) {
  BOOST_REQUIRE_MESSAGE(got.shape() == want.shape(),
                        what << ": shape " << got.shape() << ", PyTorch " << want.shape());
  const double difference = relative_difference(got, want);
  BOOST_TEST(difference <= 1e-4, what << ": relative difference " << difference);
}

// Indices PyTorch wrote as float.
inline std::vector<std::int64_t> whole_numbers(const Tensor<float>& t) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<std::int64_t>(t[i]));
  return out;
}

}  // namespace ptrain::test
