#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/pool.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::CpuVars;
using test::Emulated;
using test::emulated;

BOOST_AUTO_TEST_SUITE(pool_test)

namespace {

// 2 * sin(0.7 * i + 0.3) over the flattened tensor, as in the PyTorch script of the references.
Tensor<double> sequence(const Shape& shape) {
  Tensor<double> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = 2.0 * std::sin(0.7 * static_cast<double>(i) + 0.3);
  return t;
}

void check_close(const Tensor<double>& got, const std::vector<double>& expected, double tol = 1e-8) {
  BOOST_REQUIRE_EQUAL(got.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::int64_t i = 0; i < got.numel(); ++i)
    BOOST_TEST(std::abs(got[i] - expected[static_cast<std::size_t>(i)]) <= tol,
               "element " << i << ": got " << got[i] << ", expected " << expected[static_cast<std::size_t>(i)]);
}

template <class F>
void check_gradient(F f, const Shape& shape, std::uint64_t seed = 1) {
  auto r = gradcheck([f](const std::vector<Var<double>>& v) { return f(v[0]); }, {random_tensor(shape, seed)});
  BOOST_TEST(r.ok, r.report);
}

// f on float and on double inputs agree, forward and backward.
template <class F>
void check_float_matches_double(F f, const Shape& shape) {
  const Tensor<double> xd = random_tensor(shape, 21);
  Tensor<float> xf(shape);
  for (std::int64_t i = 0; i < xd.numel(); ++i) xf[i] = static_cast<float>(xd[i]);
  Var<double> vd(xd, true);
  Var<float> vf(xf, true);
  Var<double> yd = f(vd);
  Var<float> yf = f(vf);
  const Tensor<double> gy = random_tensor(yd.shape(), 22);
  Tensor<float> gyf(gy.shape());
  for (std::int64_t i = 0; i < gy.numel(); ++i) gyf[i] = static_cast<float>(gy[i]);
  backward(yd, gy.clone());
  backward(yf, gyf);
  for (std::int64_t i = 0; i < yd.numel(); ++i) BOOST_TEST(std::abs(yf.value()[i] - yd.value()[i]) < 1e-6);
  for (std::int64_t i = 0; i < xd.numel(); ++i) BOOST_TEST(std::abs(vf.grad()[i] - vd.grad()[i]) < 1e-6);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

BOOST_AUTO_TEST_CASE(max_pool_gradients) {
  // Random inputs have no ties, so each window's maximum is unique and the gradient defined.
  check_gradient([](const Var<double>& x) { return max_pool2d(x, 2); }, {2, 3, 6, 6});
  check_gradient([](const Var<double>& x) { return max_pool2d(x, 3, 2, 1); }, {2, 2, 7, 7});
  check_gradient([](const Var<double>& x) { return max_pool2d(x, 3, 1, 1); }, {1, 2, 5, 4});
  check_gradient([](const Var<double>& x) { return max_pool2d(x, Pool2dOptions{2, 3, 1, 2, 1, 1}); }, {2, 2, 5, 7});
  Pool2dOptions ceil = Pool2dOptions::square(3, 2, 1);
  ceil.ceil_mode = true;
  check_gradient([ceil](const Var<double>& x) { return max_pool2d(x, ceil); }, {2, 2, 6, 6});
}

BOOST_AUTO_TEST_CASE(avg_pool_gradients) {
  check_gradient([](const Var<double>& x) { return avg_pool2d(x, 2); }, {2, 3, 6, 6});
  check_gradient([](const Var<double>& x) { return avg_pool2d(x, 3, 2, 1); }, {2, 2, 7, 7});
  Pool2dOptions exclude = Pool2dOptions::square(3, 2, 1);
  exclude.count_include_pad = false;
  check_gradient([exclude](const Var<double>& x) { return avg_pool2d(x, exclude); }, {2, 2, 6, 7});
  Pool2dOptions ceil{3, 2, 2, 1, 1, 0, true, true};
  check_gradient([ceil](const Var<double>& x) { return avg_pool2d(x, ceil); }, {1, 2, 6, 6});
}

BOOST_AUTO_TEST_CASE(adaptive_avg_pool_gradients) {
  check_gradient([](const Var<double>& x) { return adaptive_avg_pool2d(x, 3, 4); }, {2, 2, 5, 7});
  check_gradient([](const Var<double>& x) { return adaptive_avg_pool2d(x, 1, 1); }, {2, 3, 4, 4});
  check_gradient([](const Var<double>& x) { return adaptive_avg_pool2d(x, 4, 3); }, {1, 2, 3, 2});  // upsampling
}

BOOST_AUTO_TEST_CASE(forward_matches_pytorch) {
  // torch.nn.functional in float64 on the same sequences.
  Var<double> x(sequence({1, 2, 5, 5}));
  check_close(max_pool2d(x, 3, 2, 1).value(),
              {1.68294197, 1.983329621, 1.350926361, 1.978716493, 1.978716493, 1.71832363, 1.973543929, 1.30057568,
               1.71832363, 1.274845192, 1.735288201, 1.967813389, 1.274845192, 1.961526495, 1.961526495, 1.767740847,
               1.954685025, 1.222310293});
  Pool2dOptions ceil = Pool2dOptions::square(2, 2);
  ceil.ceil_mode = true;
  check_close(max_pool2d(x, ceil).value(),
              {1.68294197, 1.983329621, 0.623082727, 1.978716493, 1.32593846, 1.71832363, 1.973543929, 0.01592636757,
               -1.96813001, 1.274845192, 1.735288201, 1.967813389, 0.718116708, 1.961526495, 1.248754271, 1.767740847,
               1.954685025, -0.08493606943});
  check_close(avg_pool2d(x, 3, 2, 1).value(),
              {-0.100532626, 0.06083056391, 0.145490787, -0.356884788, -0.3253256786, 0.1164457176, -0.04873968896,
               -0.1969028169, -0.09678565187, -0.1291358914, -0.1729446138, 0.001317385451, -0.006289482066,
               -0.4298036677, -0.3113663352, 0.1265052229, -0.00682709581, -0.1315509377});
  Pool2dOptions exclude = Pool2dOptions::square(3, 2, 1);
  exclude.count_include_pad = false;
  check_close(avg_pool2d(x, exclude).value(),
              {-0.2261984086, 0.09124584587, 0.3273542708, -0.535327182, -0.3253256786, 0.1746685764, -0.1096643002,
               -0.2953542254, -0.2177677167, -0.2905557555, -0.2594169207, 0.002964117265, -0.009434223099,
               -0.4298036677, -0.4670495028, 0.2846367516, -0.01024064372, -0.2959896097});
  Pool2dOptions avg_ceil = Pool2dOptions::square(3, 2, 1);
  avg_ceil.ceil_mode = true;
  check_close(avg_pool2d(Var<double>(sequence({1, 1, 6, 6})), avg_ceil).value(),
              {-0.1608874626, 0.3472908931, 0.501449374, 0.1258334519, 0.002976919143, -0.006844398057,
               -0.009586025474, -0.002325905987, -0.008013254158, -0.003750093983, 0.009500528631, 0.006388295389,
               0.2095237623, -0.5489097244, -0.7240858956, -0.1633175631});
  check_close(adaptive_avg_pool2d(Var<double>(sequence({1, 1, 5, 7})), 3, 4).value(),
              {-0.06017006454, 1.098900098, 0.8693166831, -0.4508216765, -0.7350290585, -0.6757166381, 0.2527607258,
               0.8448375817, 1.25490091, -0.0005768407217, -1.280158992, -0.9223941252});
}

BOOST_AUTO_TEST_CASE(max_pool_padding_is_minus_infinity) {
  // All inputs negative: a zero pad would win every border window.
  Var<double> x(Tensor<double>::from({1, 1, 2, 2}, {-4, -3, -2, -1}), true);
  Var<double> y = max_pool2d(x, 2, 1, 1);
  check_close(y.value(), {-4, -3, -3, -2, -1, -1, -2, -1, -1});
  backward(y, Tensor<double>::ones(y.shape()));
  check_close(x.grad(), {1, 2, 2, 4});
}

BOOST_AUTO_TEST_CASE(max_pool_routes_gradient_to_the_first_maximum_on_ties) {
  Var<double> x(Tensor<double>::from({1, 1, 2, 2}, {5, 5, 5, 5}), true);
  Var<double> y = max_pool2d(x, 2);
  backward(y, Tensor<double>::ones(y.shape()));
  check_close(x.grad(), {1, 0, 0, 0});
}

BOOST_AUTO_TEST_CASE(max_pool_propagates_nan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Var<double> x(Tensor<double>::from({1, 1, 2, 2}, {1, nan, 3, 2}));
  BOOST_TEST(std::isnan(max_pool2d(x, 2).value()[0]));
}

BOOST_AUTO_TEST_CASE(float_path_agrees_with_double) {
  check_float_matches_double([](const auto& x) { return max_pool2d(x, 3, 2, 1); }, {2, 3, 9, 8});
  check_float_matches_double([](const auto& x) { return avg_pool2d(x, 3, 2, 1); }, {2, 3, 9, 8});
  check_float_matches_double([](const auto& x) { return adaptive_avg_pool2d(x, 3, 5); }, {2, 3, 9, 8});
  // Large enough for the planes to be spread over threads.
  check_float_matches_double([](const auto& x) { return max_pool2d(x, 3, 2, 1); }, {4, 16, 32, 32});
  check_float_matches_double([](const auto& x) { return avg_pool2d(x, 2); }, {4, 16, 32, 32});
  check_float_matches_double([](const auto& x) { return adaptive_avg_pool2d(x, 1, 1); }, {4, 16, 32, 32});
}

BOOST_AUTO_TEST_CASE(bad_windows_are_reported) {
  Var<double> x(random_tensor({1, 2, 4, 4}, 1));
  const std::string pad = error_of([&] { max_pool2d(x, 2, 2, 2); });
  BOOST_TEST(pad.find("half the kernel size") != std::string::npos, pad);
  const std::string empty = error_of([&] { avg_pool2d(x, 5); });
  BOOST_TEST(empty.find("empty output") != std::string::npos, empty);
  const std::string rank = error_of([&] { adaptive_avg_pool2d(Var<double>(random_tensor({2, 4, 4}, 1)), 2, 2); });
  BOOST_TEST(rank.find("[N, C, H, W]") != std::string::npos, rank);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(max_pool2d_matches_finite_differences_and_the_cpu, D, test::Devices) {
  // ResNet's stem pool (3, 2, 1) and a ceil-mode rectangular one.
  const Pool2dOptions rect{.kernel_h = 2, .kernel_w = 3, .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                           .ceil_mode = true};
  const std::vector<Tensor<double>> inputs{random_tensor({2, 3, 7, 6}, 90)};
  test::check_matches_cpu_on<D>([](const CpuVars& v) { return max_pool2d(v[0], 3, 2, 1); },
                    [](const auto& v) { return max_pool2d(v[0], 3, 2, 1); }, inputs);
  test::check_matches_cpu_on<D>([&](const CpuVars& v) { return max_pool2d(v[0], rect); },
                    [&](const auto& v) { return max_pool2d(v[0], rect); }, inputs);
  // Distinct values, so no tie moves the maximum under a small perturbation.
  test::expect_gradcheck_on<D>([](const auto& v) { return max_pool2d(v[0], 3, 2, 1); }, {random_tensor({1, 2, 5, 5}, 91)});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(adaptive_avg_pool2d_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({2, 3, 7, 5}, 100)};
  for (auto [oh, ow] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 2}, {7, 5}}) {
    test::check_matches_cpu_on<D>([&](const CpuVars& v) { return adaptive_avg_pool2d(v[0], oh, ow); },
                      [&](const auto& v) { return adaptive_avg_pool2d(v[0], oh, ow); }, inputs);
  }
  test::expect_gradcheck_on<D>([](const auto& v) { return adaptive_avg_pool2d(v[0], 2, 3); },
                   {random_tensor({1, 2, 5, 4}, 101)});
  const Emulated x(Tensor<double>::zeros({2, 3}).to<HostEmulated>());
  BOOST_TEST(test::error_message([&] { (void)adaptive_avg_pool2d(x, 1, 1); })
                 .find("adaptive_avg_pool2d: input must be [N, C, H, W], got [2, 3]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(avg_pool2d_matches_the_cpu_and_finite_differences, D, test::Devices) {
  Pool2dOptions odd{.kernel_h = 3, .kernel_w = 2, .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                    .ceil_mode = true, .count_include_pad = false};
  for (const Pool2dOptions& o : {Pool2dOptions::square(2), Pool2dOptions::square(3, 2, 1), odd}) {
    BOOST_TEST_CONTEXT("kernel " << o.kernel_h << "x" << o.kernel_w << ", ceil " << o.ceil_mode) {
      test::check_op<D>([o](const auto& v) { return avg_pool2d(v[0], o); }, {random_tensor({2, 3, 7, 6}, 3)});
    }
  }
  test::check_op<D>([](const auto& v) { return avg_pool2d(v[0], 3, 2, 1); }, {random_tensor({1, 2, 5, 5}, 4)});
  const Tensor<double> small = random_tensor({1, 1, 2, 2}, 5);
  test::expect_same_error<D>([&] { (void)avg_pool2d(Var<double>(small), 3); }, [&] { (void)avg_pool2d(emulated(small), 3); });
}

BOOST_AUTO_TEST_SUITE_END()
