#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/layer_norm.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(layer_norm_test)

// Each row of [2, 3] x [2, 2] (normalised over the last two dimensions) against the formula.
BOOST_AUTO_TEST_CASE(layer_norm_normalises_the_trailing_dimensions) {
  const Tensor<double> x = random_tensor({2, 3, 2, 2}, 1, -2, 3);
  const Tensor<double> w = random_tensor({2, 2}, 2), b = random_tensor({2, 2}, 3);
  const double eps = 1e-3;
  const Tensor<double> y = layer_norm(Var<double>(x), Shape{2, 2}, Var<double>(w), Var<double>(b), eps).value();
  const Tensor<double> plain = layer_norm(Var<double>(x), Shape{2, 2}, Var<double>(), Var<double>(), eps).value();
  for (std::int64_t row = 0; row < 6; ++row) {
    double mean = 0, var = 0;
    for (int j = 0; j < 4; ++j) mean += x[row * 4 + j] / 4;
    for (int j = 0; j < 4; ++j) var += (x[row * 4 + j] - mean) * (x[row * 4 + j] - mean) / 4;
    for (int j = 0; j < 4; ++j) {
      const double xhat = (x[row * 4 + j] - mean) / std::sqrt(var + eps);
      BOOST_TEST(std::abs(plain[row * 4 + j] - xhat) <= 1e-12);
      BOOST_TEST(std::abs(y[row * 4 + j] - (xhat * w[j] + b[j])) <= 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(layer_norm_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const Tensor<double> x = random_tensor({3, 2, 5}, 4), w = random_tensor({5}, 5), b = random_tensor({5}, 6);
  test::check_op<D>([](const auto& v) { return layer_norm(v[0], Shape{5}, v[1], v[2]); }, {x, w, b});
  test::check_op<D>([](const auto& v) { return layer_norm(v[0], Shape{5}, v[1]); }, {x, w});
  test::check_op<D>([](const auto& v) { return layer_norm(v[0], Shape{2, 5}, {}, {}, 0.1); }, {x});
}

BOOST_AUTO_TEST_CASE(layer_norm_checks_its_shapes) {
  Var<double> x(random_tensor({3, 4}, 7));
  BOOST_TEST(test::error_message([&] { (void)layer_norm(x, Shape{3}); })
                 .find("layer_norm: input of shape [3, 4] does not end with normalized_shape [3]") !=
             std::string::npos);
  BOOST_TEST(test::error_message([&] { (void)layer_norm(x, Shape{4}, Var<double>(random_tensor({3}, 8))); })
                 .find("layer_norm: weight [3] for normalized_shape [4]") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
