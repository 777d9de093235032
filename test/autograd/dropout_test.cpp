#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/dropout.hpp>
#include <ptrain/device/threads.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::Emulated;
using test::emulated;

BOOST_AUTO_TEST_SUITE(dropout_test)

BOOST_AUTO_TEST_CASE(evaluation_and_p_zero_pass_the_input_through) {
  Var<double> x(random_tensor({3, 4}, 1), true);
  BOOST_TEST(dropout(x, 0.5, false).node() == x.node());
  BOOST_TEST(dropout(x, 0.0, true).node() == x.node());
}

BOOST_AUTO_TEST_CASE(p_one_zeroes_values_and_gradients) {
  Var<double> x(random_tensor({3, 4}, 1), true);
  auto y = dropout(x, 1.0, true);
  BOOST_TEST((y.value().array() == 0.0).all());
  backward(y, Tensor<double>::ones(y.shape()));
  BOOST_TEST((x.grad().array() == 0.0).all());
}

BOOST_AUTO_TEST_CASE(zeroes_a_fraction_p_and_scales_survivors) {
  const double p = 0.3;
  const std::int64_t n = 1 << 20;
  Rng rng(123);
  Var<float> x(Tensor<float>::full({n}, 2.0f));
  const auto y = dropout(x, p, true, rng).value();
  std::int64_t zeros = 0;
  bool scaled = true;
  for (std::int64_t i = 0; i < n; ++i) {
    if (y[i] == 0.f)
      ++zeros;
    else
      scaled = scaled && y[i] == static_cast<float>(1.0 / (1.0 - p)) * 2.0f;
  }
  // The zero count is binomial: its standard deviation is sqrt(p (1 - p) / n) = 0.00045.
  const double fraction = static_cast<double>(zeros) / static_cast<double>(n);
  BOOST_TEST(std::abs(fraction - p) < 0.003, "fraction zeroed " << fraction);
  BOOST_TEST(scaled);
  BOOST_TEST(std::abs(y.array().template cast<double>().mean() - 2.0) < 0.01);
}

BOOST_AUTO_TEST_CASE(backward_uses_the_forward_mask) {
  const double p = 0.4;
  Rng rng(9);
  Var<double> x(random_tensor({64}, 1, 0.5, 1.5), true);
  auto y = dropout(x, p, true, rng);
  backward(y, Tensor<double>::ones(y.shape()));
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < 64; ++i) {
    const bool forward_kept = y.value()[i] != 0.0;
    kept += forward_kept;
    BOOST_TEST(x.grad()[i] == (forward_kept ? 1.0 / (1.0 - p) : 0.0));
  }
  BOOST_TEST(kept > 0);
  BOOST_TEST(kept < 64);
}

BOOST_AUTO_TEST_CASE(gradient_with_a_fixed_mask) {
  // A generator seeded the same way in every forward of the check gives the same mask each time.
  auto r = gradcheck(
      [](const auto& v) {
        Rng rng(42);
        return dropout(v[0], 0.4, true, rng);
      },
      {random_tensor({5, 7}, 1)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(mask_follows_the_generator_not_the_thread_count) {
  const auto x = Tensor<float>::ones({1 << 17});
  auto run = [&](std::uint64_t seed, int threads) {
    set_num_threads(threads);
    Rng rng(seed);
    return dropout(Var<float>(x), 0.5, true, rng).value().to_vector();
  };
  const auto one = run(5, 1), two = run(5, 2), other = run(6, 2);
  set_num_threads(2);
  BOOST_TEST(one == two);
  BOOST_TEST(one != other);
  // Successive calls on one generator draw fresh masks.
  Rng rng(5);
  const auto first = dropout(Var<float>(x), 0.5, true, rng).value().to_vector();
  const auto second = dropout(Var<float>(x), 0.5, true, rng).value().to_vector();
  BOOST_TEST(first == one);
  BOOST_TEST(first != second);
}

BOOST_AUTO_TEST_CASE(probability_outside_unit_interval_is_an_error) {
  Var<double> x(random_tensor({2}, 1));
  BOOST_CHECK_EXCEPTION(dropout(x, 1.5, true), Error, [](const Error& e) {
    return std::string(e.what()).find("dropout: probability 1.5 is outside [0, 1]") != std::string::npos;
  });
  BOOST_CHECK_THROW(dropout(x, -0.1, false), Error);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(dropout_draws_the_cpu_mask_from_the_same_rng, D, test::Devices) {
  const auto drop = [](const auto& v) {
    Rng rng(70);
    return dropout(v[0], 0.3, true, rng);
  };
  const Tensor<double> x = random_tensor({6, 7}, 71, 0.5, 1);  // no zeros of its own
  test::check_op<D>(drop, {x});
  const Tensor<double> y = on_host(drop(std::vector<Var<double, D>>{Var<double, D>(on_device<D>(x.clone()))}).value());
  std::int64_t dropped = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) dropped += y[i] == 0.0;
  BOOST_TEST(dropped > 0);
  BOOST_TEST(dropped < y.numel());
  // p = 1 drops everything; evaluation and p = 0 pass the input through.
  test::check_op<D>([](const auto& v) { return dropout(v[0], 1.0, true); }, {x});
  const Emulated e = emulated(x);
  BOOST_TEST(dropout(e, 0.5, false).node() == e.node());
  BOOST_TEST(dropout(e, 0.0, true).node() == e.node());
  test::expect_same_error<D>([&] { (void)dropout(Var<double>(x), 1.5, true); }, [&] { (void)dropout(e, 1.5, true); });
}

BOOST_AUTO_TEST_SUITE_END()
