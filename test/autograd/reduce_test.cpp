#include <boost/test/unit_test.hpp>

#include <cmath>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/reduce.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::emulated;

BOOST_AUTO_TEST_SUITE(reduce_test)

BOOST_AUTO_TEST_CASE(sum_and_mean_are_scalars) {
  Var<double> x(Tensor<double>::from({2, 2}, {1, 2, 3, 6}));
  BOOST_TEST(sum(x).shape() == Shape{});
  BOOST_TEST(sum(x).value()[0] == 12.0);
  BOOST_TEST(mean(x).value()[0] == 3.0);
}

BOOST_AUTO_TEST_CASE(float_sum_of_many_elements_keeps_its_digits) {
  // 10^7 times 0.1f: a running float sum drifts by ~9% (to about 1087937), a double one not at all.
  Var<float> x(Tensor<float>::full({10'000'000}, 0.1f));
  const double exact = 1e7 * static_cast<double>(0.1f);
  BOOST_TEST(std::abs(static_cast<double>(sum(x).value()[0]) - exact) < 0.1);
  BOOST_TEST(mean(x).value()[0] == 0.1f);
}

BOOST_AUTO_TEST_CASE(gradients) {
  auto s = gradcheck([](const auto& v) { return sum(v[0]); }, {random_tensor({3, 4}, 1)});
  BOOST_TEST(s.ok, s.report);
  auto m = gradcheck([](const auto& v) { return mean(v[0]); }, {random_tensor({3, 4}, 2)});
  BOOST_TEST(m.ok, m.report);
}

BOOST_AUTO_TEST_CASE(mean_of_nothing_is_an_error) {
  BOOST_CHECK_THROW(mean(Var<double>(Tensor<double>(Shape{0, 3}))), Error);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(sum_and_mean_match_the_cpu_and_finite_differences, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({3, 4, 5}, 44)};
  test::check_op<D>([](const auto& v) { return sum(v[0]); }, inputs);
  test::check_op<D>([](const auto& v) { return mean(v[0]); }, inputs);
  const Tensor<double> empty({2, 0});
  test::expect_same_error<D>([&] { (void)mean(Var<double>(empty)); }, [&] { (void)mean(emulated(empty)); });
}

BOOST_AUTO_TEST_SUITE_END()
