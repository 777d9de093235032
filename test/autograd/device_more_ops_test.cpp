// The rest of the device-generic ops (avg_pool2d, conv_transpose2d, upsample, sigmoid, softmax,
// log_softmax, scale, concat, mse_loss, binary_cross_entropy_with_logits, dropout) on HostEmulated,
// the GPU algorithms run by HostExecutor: equal to the CPU ops in float and double, finite-difference
// gradchecks in double, and the CPU ops' argument checks.
#include <cstdint>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/device_ops/activation.hpp>
#include <ptrain/autograd/device_ops/conv.hpp>
#include <ptrain/autograd/device_ops/pool.hpp>
#include <ptrain/autograd/device_ops/softmax.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/autograd/ops/pool.hpp>

#include "../common/compare.hpp"
#include "../common/device_compare.hpp"

using namespace ptrain;

namespace {

using Emulated = Var<double, HostEmulated>;
using EmulatedVars = std::vector<Emulated>;
using CpuVars = std::vector<Var<double>>;

// op, a generic lambda of the input variables, on HostEmulated against the CPU in double and in
// float (values and gradients), and its gradcheck on HostEmulated in double.
template <class Op>
void check_op(const Op& op, const std::vector<Tensor<double>>& inputs, double float_tol = 1e-5) {
  test::expect_gradcheck([&](const EmulatedVars& v) { return op(v); }, inputs);
  test::check_matches_cpu([&](const CpuVars& v) { return op(v); }, [&](const EmulatedVars& v) { return op(v); },
                          inputs);
  test::check_matches_cpu_in<float>([&](const std::vector<Var<float>>& v) { return op(v); },
                                    [&](const std::vector<Var<float, HostEmulated>>& v) { return op(v); }, inputs,
                                    float_tol);
}

// The device op fails with the CPU op's message.
void expect_same_error(const std::function<void()>& cpu, const std::function<void()>& device) {
  const std::string want = test::error_message(cpu);
  BOOST_TEST(want != "no error");
  BOOST_TEST(test::error_message(device) == want);
}

Emulated emulated(const Tensor<double>& t) { return Emulated(t.to<HostEmulated>()); }

}  // namespace

BOOST_AUTO_TEST_SUITE(device_more_ops_test)

BOOST_AUTO_TEST_CASE(sigmoid_matches_the_cpu_and_finite_differences) {
  check_op([](const auto& v) { return sigmoid(v[0]); }, {random_tensor({3, 7}, 1, -4, 4)});
}

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_match_the_cpu_along_each_dimension) {
  const std::vector<Tensor<double>> inputs{random_tensor({3, 4, 5}, 2, -3, 3)};
  for (int dim : {0, 1, -1}) {
    BOOST_TEST_CONTEXT("dim " << dim) {
      check_op([dim](const auto& v) { return softmax(v[0], dim); }, inputs);
      check_op([dim](const auto& v) { return log_softmax(v[0], dim); }, inputs);
    }
  }
  expect_same_error([&] { (void)softmax(Var<double>(inputs[0]), 3); },
                    [&] { (void)softmax(emulated(inputs[0]), 3); });
}

BOOST_AUTO_TEST_CASE(avg_pool2d_matches_the_cpu_and_finite_differences) {
  Pool2dOptions odd{.kernel_h = 3, .kernel_w = 2, .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                    .ceil_mode = true, .count_include_pad = false};
  for (const Pool2dOptions& o : {Pool2dOptions::square(2), Pool2dOptions::square(3, 2, 1), odd}) {
    BOOST_TEST_CONTEXT("kernel " << o.kernel_h << "x" << o.kernel_w << ", ceil " << o.ceil_mode) {
      check_op([o](const auto& v) { return avg_pool2d(v[0], o); }, {random_tensor({2, 3, 7, 6}, 3)});
    }
  }
  check_op([](const auto& v) { return avg_pool2d(v[0], 3, 2, 1); }, {random_tensor({1, 2, 5, 5}, 4)});
  const Tensor<double> small = random_tensor({1, 1, 2, 2}, 5);
  expect_same_error([&] { (void)avg_pool2d(Var<double>(small), 3); }, [&] { (void)avg_pool2d(emulated(small), 3); });
}

struct ConvTransposeCase {
  Shape x, weight;
  bool bias;
  ConvTranspose2dOptions options;
};

BOOST_AUTO_TEST_CASE(conv_transpose2d_matches_the_cpu_and_finite_differences) {
  const std::vector<ConvTransposeCase> cases{
      {{2, 3, 4, 3}, {3, 2, 3, 3}, true, ConvTranspose2dOptions::square(1, 1)},
      {{1, 2, 3, 4}, {2, 3, 2, 2}, false, ConvTranspose2dOptions::square(2)},  // UNet's up-convolution
      {{2, 4, 3, 3}, {4, 1, 3, 2}, true,
       {.stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 0, .output_pad_h = 1, .output_pad_w = 0, .dilation_h = 1,
        .dilation_w = 2, .groups = 2}},
  };
  std::uint64_t seed = 10;
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("x " << c.x << ", weight " << c.weight << ", bias " << c.bias) {
      std::vector<Tensor<double>> inputs{random_tensor(c.x, seed), random_tensor(c.weight, seed + 1)};
      if (c.bias) inputs.push_back(random_tensor({c.weight[1] * c.options.groups}, seed + 2));
      seed += 3;
      check_op(
          [&c](const auto& v) {
            using V = std::decay_t<decltype(v[0])>;
            return conv_transpose2d(v[0], v[1], v.size() > 2 ? v[2] : V(), c.options);
          },
          inputs);
    }
  }
  const Tensor<double> x = random_tensor({1, 2, 3, 3}, 20), w = random_tensor({2, 3, 3, 3}, 21);
  const Tensor<double> bad_bias = random_tensor({2}, 22);
  expect_same_error([&] { (void)conv_transpose2d(Var<double>(x), Var<double>(w), Var<double>(bad_bias)); },
                    [&] { (void)conv_transpose2d(emulated(x), emulated(w), emulated(bad_bias)); });
}

BOOST_AUTO_TEST_SUITE_END()
