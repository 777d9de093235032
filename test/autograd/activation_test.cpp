#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::emulated;

BOOST_AUTO_TEST_SUITE(activation_test)

namespace {
// ((i * a) % m - m / 2) * s: the same inputs the reference numbers were computed from in PyTorch.
Tensor<double> pattern(const Shape& shape, int a, int m, double s) {
  Tensor<double> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<double>((i * a) % m - m / 2) * s;
  return t;
}
void check_close(const Tensor<double>& got, const std::vector<double>& expected, double tol = 1e-12) {
  BOOST_REQUIRE_EQUAL(got.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i)
    BOOST_TEST(std::abs(got[static_cast<std::int64_t>(i)] - expected[i]) <= tol,
               "element " << i << ": " << got[static_cast<std::int64_t>(i)] << " vs " << expected[i]);
}
}  // namespace

BOOST_AUTO_TEST_CASE(sigmoid_matches_pytorch_and_saturates_without_nan) {
  Var<double> x(Tensor<double>::from({6}, {-20, -1, 0, 0.5, 3, 40}));
  // torch.sigmoid
  check_close(sigmoid(x).value(),
              {2.0611536181902037e-09, 0.2689414213699951, 0.5, 0.62245933120185459, 0.95257412682243336, 1},
              1e-15);
  Var<float> extreme(Tensor<float>::from({2}, {-1000.f, 1000.f}));
  const auto y = sigmoid(extreme).value();
  BOOST_TEST(y[0] == 0.f);
  BOOST_TEST(y[1] == 1.f);
}

BOOST_AUTO_TEST_CASE(sigmoid_gradient) {
  auto r = gradcheck([](const auto& v) { return sigmoid(v[0]); }, {random_tensor({3, 4}, 1, -4, 4)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(gelu_matches_both_of_pytorchs_forms) {
  Var<double> x(Tensor<double>::from({7}, {-3, -1, -0.5, 0, 0.25, 1, 2.5}));
  // torch.nn.functional.gelu(x) and gelu(x, approximate='tanh')
  check_close(gelu(x).value(), {-0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0.0,
                                0.14967658142073093, 0.8413447460685429, 2.4844758366855597},
              1e-15);
  check_close(gelu(x, true).value(), {-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                                      0.149675350701685, 0.8411919906082768, 2.484915733910001},
              1e-15);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(gelu_matches_finite_differences_and_the_cpu, D, test::Devices) {
  for (bool tanh_form : {false, true})
    test::check_op<D>([tanh_form](const auto& v) { return gelu(v[0], tanh_form); }, {random_tensor({3, 5}, 2, -3, 3)});
}

BOOST_AUTO_TEST_CASE(softmax_matches_pytorch_along_each_dimension) {
  Var<double> x(pattern({2, 3, 4}, 7, 11, 0.3));
  // torch.softmax(x, 0) and torch.softmax(x, 1)
  check_close(softmax(x, 0).value(),
              {0.10909682119561294, 0.76852478349901754, 0.10909682119561294, 0.76852478349901754,
               0.76852478349901754, 0.10909682119561298, 0.76852478349901754, 0.76852478349901754,
               0.10909682119561298, 0.76852478349901754, 0.76852478349901754, 0.10909682119561294,
               0.89090317880438707, 0.23147521650098238, 0.89090317880438707, 0.23147521650098238,
               0.23147521650098238, 0.89090317880438707, 0.23147521650098238, 0.23147521650098238,
               0.89090317880438707, 0.23147521650098238, 0.23147521650098238, 0.89090317880438707});
  check_close(softmax(x, 1).value(),
              {0.11905461673799148,  0.38865304614360863,  0.1190546167379915,   0.78559703458927588,
               0.72023846027564531,  0.086720216428198493, 0.72023846027564531,  0.17529039214003669,
               0.16070692298636324,  0.52462673742819288,  0.16070692298636324,  0.039112573270687456,
               0.38865304614360863,  0.1190546167379915,   0.78559703458927588,  0.38865304614360863,
               0.086720216428198493, 0.72023846027564531,  0.17529039214003669,  0.086720216428198493,
               0.52462673742819288,  0.16070692298636324,  0.039112573270687456, 0.52462673742819288});
}

BOOST_AUTO_TEST_CASE(log_softmax_matches_pytorch_along_last_and_middle_dimension) {
  Var<double> x(pattern({2, 3, 4}, 7, 11, 0.3));
  const std::vector<double> last{
      -3.4566733979118429,  -1.3566733979118428,  -2.556673397911843,   -0.45667339791184275,
      -1.504436342070119,   -2.7044363420701187,  -0.60443634207011909, -1.804436342070119,
      -2.514998582091613,   -0.41499858209161317, -1.6149985820916131,  -2.8149985820916132,
      -1.504436342070119,   -2.7044363420701192,  -0.60443634207011898, -1.8044363420701188,
      -2.514998582091613,   -0.41499858209161317, -1.6149985820916131,  -2.8149985820916132,
      -0.75740303013248589, -1.9574030301324858,  -3.1574030301324858,  -1.0574030301324857};
  check_close(log_softmax(x, 2).value(), last);
  check_close(log_softmax(x, -1).value(), last);
  check_close(log_softmax(x, 1).value(),
              {-2.1281729269776513,  -0.94506824558129432, -2.1281729269776508,  -0.24131129665715703,
               -0.32817292697765116, -2.445068245581294,   -0.32817292697765116, -1.7413112966571571,
               -1.8281729269776512,  -0.64506824558129439, -1.8281729269776512,  -3.2413112966571571,
               -0.94506824558129432, -2.1281729269776508,  -0.24131129665715703, -0.94506824558129443,
               -2.445068245581294,   -0.32817292697765116, -1.7413112966571571,  -2.445068245581294,
               -0.64506824558129439, -1.8281729269776512,  -3.2413112966571571,  -0.64506824558129439});
}

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_gradients_along_every_dimension) {
  for (int dim : {0, 1, 2, -1}) {
    auto s =
        gradcheck([dim](const auto& v) { return softmax(v[0], dim); }, {random_tensor({2, 3, 4}, 3, -2, 2)});
    BOOST_TEST(s.ok, "softmax dim " << dim << ": " << s.report);
    auto l = gradcheck([dim](const auto& v) { return log_softmax(v[0], dim); },
                       {random_tensor({2, 3, 4}, 4, -2, 2)});
    BOOST_TEST(l.ok, "log_softmax dim " << dim << ": " << l.report);
  }
  for (int dim : {0, 1}) {
    auto s =
        gradcheck([dim](const auto& v) { return softmax(v[0], dim); }, {random_tensor({3, 5}, 5, -2, 2)});
    BOOST_TEST(s.ok, "2D softmax dim " << dim << ": " << s.report);
    auto l =
        gradcheck([dim](const auto& v) { return log_softmax(v[0], dim); }, {random_tensor({3, 5}, 6, -2, 2)});
    BOOST_TEST(l.ok, "2D log_softmax dim " << dim << ": " << l.report);
  }
}

BOOST_AUTO_TEST_CASE(large_inputs_do_not_overflow) {
  Var<double> big(Tensor<double>::from({1, 3}, {1000, 1001, 1002}));
  Var<double> small(Tensor<double>::from({1, 3}, {0, 1, 2}));
  check_close(softmax(big, 1).value(), softmax(small, 1).value().to_vector(), 1e-15);
  Var<double> spread(Tensor<double>::from({1, 2}, {-1000, 0}));
  check_close(log_softmax(spread, 1).value(), {-1000, 0}, 1e-12);
}

// The float kernels on tensors large enough to run threaded, against the double ones.
BOOST_AUTO_TEST_CASE(threaded_float_paths_match_double) {
  for (int dim : {0, 1, 2}) {
    const Tensor<double> xd = random_tensor({40, 30, 50}, 11 + dim, -8, 8);
    Tensor<float> xf(xd.shape());
    for (std::int64_t i = 0; i < xd.numel(); ++i) xf[i] = static_cast<float>(xd[i]);
    for (bool take_log : {false, true}) {
      const auto yd = (take_log ? log_softmax(Var<double>(xd), dim) : softmax(Var<double>(xd), dim)).value();
      const auto yf = (take_log ? log_softmax(Var<float>(xf), dim) : softmax(Var<float>(xf), dim)).value();
      double worst = 0;
      for (std::int64_t i = 0; i < yd.numel(); ++i) worst = std::max(worst, std::abs(yd[i] - yf[i]));
      BOOST_TEST(worst < 1e-5,
                 "dim " << dim << (take_log ? " log_softmax" : " softmax") << ": error " << worst);
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_rows_sum_to_one) {
  const auto y = softmax(Var<double>(random_tensor({7, 9}, 2, -5, 5)), -1).value();
  for (std::int64_t r = 0; r < 7; ++r) BOOST_TEST(std::abs(y.matrix(7).row(r).sum() - 1.0) < 1e-12);
}

BOOST_AUTO_TEST_CASE(dimension_out_of_range_is_an_error) {
  Var<double> x(random_tensor({2, 3}, 1));
  BOOST_CHECK_EXCEPTION(softmax(x, 2), Error, [](const Error& e) {
    return std::string(e.what()).find("softmax: dimension 2 is out of range for a tensor of shape [2, 3]") !=
           std::string::npos;
  });
  BOOST_CHECK_THROW(log_softmax(x, -3), Error);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(relu_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({4, 9}, 4)};
  test::expect_gradcheck_on<D>([](const auto& v) { return relu(v[0]); }, inputs);
  test::check_matches_cpu_on<D>([](const std::vector<Var<double>>& v) { return relu(v[0]); },
                    [](const auto& v) { return relu(v[0]); }, inputs);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(sigmoid_matches_the_cpu_and_finite_differences, D, test::Devices) {
  test::check_op<D>([](const auto& v) { return sigmoid(v[0]); }, {random_tensor({3, 7}, 1, -4, 4)});
}

BOOST_AUTO_TEST_CASE(tanh_matches_pytorch) {
  const Var<double> x(pattern({7}, 1, 7, 0.75));
  // torch.tanh(torch.tensor([-2.25, -1.5, -0.75, 0., 0.75, 1.5, 2.25], dtype=torch.float64))
  check_close(tanh(x).value(), {-0.9780261147388136, -0.9051482536448664, -0.6351489523872873, 0.0,
                                0.6351489523872873, 0.9051482536448664, 0.9780261147388136});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(tanh_matches_the_cpu_and_finite_differences, D, test::Devices) {
  test::check_op<D>([](const auto& v) { return tanh(v[0]); }, {random_tensor({3, 7}, 3, -3, 3)});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(softmax_and_log_softmax_match_the_cpu_along_each_dimension, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({3, 4, 5}, 2, -3, 3)};
  for (int dim : {0, 1, -1}) {
    BOOST_TEST_CONTEXT("dim " << dim) {
      test::check_op<D>([dim](const auto& v) { return softmax(v[0], dim); }, inputs);
      test::check_op<D>([dim](const auto& v) { return log_softmax(v[0], dim); }, inputs);
    }
  }
  test::expect_same_error<D>([&] { (void)softmax(Var<double>(inputs[0]), 3); },
                    [&] { (void)softmax(emulated(inputs[0]), 3); });
}

BOOST_AUTO_TEST_SUITE_END()
