#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/embedding.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(embedding_test)

namespace {
const std::vector<std::int64_t> indices{3, 1, 0, 3, 4, 1};  // [2, 3], rows 1 and 3 twice, row 2 never
}

BOOST_AUTO_TEST_CASE(embedding_gathers_rows_and_sums_gradients_per_row_except_padding) {
  const Tensor<double> w = random_tensor({5, 4}, 1);
  Var<double> weight(w.clone(), true);
  auto y = embedding(std::span<const std::int64_t>(indices), Shape{2, 3}, weight, 1);
  BOOST_REQUIRE(y.shape() == (Shape{2, 3, 4}));
  for (std::size_t p = 0; p < indices.size(); ++p)
    for (std::int64_t c = 0; c < 4; ++c)
      BOOST_TEST(y.value()[static_cast<std::int64_t>(p) * 4 + c] == w[indices[p] * 4 + c]);
  Tensor<double> g({2, 3, 4});
  for (std::int64_t i = 0; i < g.numel(); ++i) g[i] = static_cast<double>(i);
  backward(y, g);
  const Tensor<double>& gw = weight.grad();
  for (std::int64_t c = 0; c < 4; ++c) {
    BOOST_TEST(gw[0 * 4 + c] == g[2 * 4 + c]);
    BOOST_TEST(gw[1 * 4 + c] == 0.0);  // padding_idx: used twice, no gradient
    BOOST_TEST(gw[2 * 4 + c] == 0.0);
    BOOST_TEST(gw[3 * 4 + c] == g[0 * 4 + c] + g[3 * 4 + c]);
    BOOST_TEST(gw[4 * 4 + c] == g[4 * 4 + c]);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(embedding_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const auto lookup = [](std::optional<std::int64_t> padding) {
    return [padding](const auto& v) {
      return embedding(std::span<const std::int64_t>(indices), Shape{3, 2}, v[0], padding);
    };
  };
  test::check_op<D>(lookup(std::nullopt), {random_tensor({5, 3}, 2)});
  // The padding row's zero gradient is a choice, not a derivative: its values and gradients
  // against the CPU's (the CPU's against the rule in the test above).
  test::check_matches_cpu_on<D>([&](const test::CpuVars& v) { return lookup(-2)(v); },
                                [&](const test::EmulatedVars& v) { return lookup(-2)(v); }, {random_tensor({5, 3}, 2)});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(embedding_takes_whole_numbers_held_as_values, D, test::Devices) {
  Var<double, D> ids(on_device<D>(Tensor<double>::from({2, 3}, {3, 1, 0, 3, 4, 1})));
  Var<double, D> weight(on_device<D>(random_tensor({5, 4}, 3)));
  const auto direct = embedding(std::span<const std::int64_t>(indices), Shape{2, 3}, weight);
  BOOST_TEST(test::relative_difference(on_host(embedding(ids, weight).value()), on_host(direct.value())) == 0.0);
  Var<double, D> fractional(on_device<D>(Tensor<double>::from({2}, {1, 2.5})));
  BOOST_TEST(test::error_message([&] { (void)embedding(fractional, weight); })
                 .find("embedding: index 2.5 at position 1 is not a whole number") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(embedding_rejects_indices_and_padding_outside_the_table) {
  Var<double> weight(random_tensor({5, 4}, 4));
  const std::vector<std::int64_t> bad{0, 5};
  BOOST_TEST(test::error_message([&] { (void)embedding(std::span<const std::int64_t>(bad), Shape{2}, weight); })
                 .find("embedding: index 5 at position 1 is outside the weight's 5 rows") != std::string::npos);
  BOOST_TEST(test::error_message([&] {
               (void)embedding(std::span<const std::int64_t>(indices), Shape{6}, weight, 5);
             }).find("embedding: padding_idx 5 is outside the weight's 5 rows") != std::string::npos);
  BOOST_TEST(test::error_message([&] { (void)embedding(std::span<const std::int64_t>(indices), Shape{5}, weight); })
                 .find("embedding: 6 indices for index shape [5]") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
