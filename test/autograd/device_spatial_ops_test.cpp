// The device-generic ops ResNet needs beyond linear/relu/cross_entropy (add, reshape, flatten,
// conv2d, batch_norm, max_pool2d, adaptive_avg_pool2d) on HostEmulated, the GPU algorithms run by
// HostExecutor: equal to the CPU ops in double, and finite-difference gradchecks.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/device_ops/activation.hpp>
#include <ptrain/autograd/device_ops/arithmetic.hpp>
#include <ptrain/autograd/device_ops/batch_norm.hpp>
#include <ptrain/autograd/device_ops/conv.hpp>
#include <ptrain/autograd/device_ops/linear.hpp>
#include <ptrain/autograd/device_ops/loss.hpp>
#include <ptrain/autograd/device_ops/pool.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/shape.hpp>

#include "../common/compare.hpp"
#include "../common/device_compare.hpp"
#include "../common/device_residual.hpp"

using namespace ptrain;

namespace {

using Emulated = Var<double, HostEmulated>;
using CpuVars = std::vector<Var<double>>;
using EmulatedVars = std::vector<Emulated>;
using test::check_matches_cpu;
using test::expect_gradcheck;
using test::relative_difference;

struct ConvCase {
  Shape x, weight;
  bool bias;
  Conv2dOptions options;
};

// ResNet's 3x3 and strided 1x1 convolutions, and an odd one: rectangular kernel, stride,
// padding and dilation per axis, groups.
const std::vector<ConvCase> conv_cases{
    {{2, 3, 7, 6}, {4, 3, 3, 3}, true, Conv2dOptions::square(1, 1)},
    {{2, 4, 7, 7}, {6, 4, 1, 1}, false, Conv2dOptions::square(2)},
    {{2, 4, 6, 7}, {6, 2, 3, 2}, true, {.stride_h = 1, .stride_w = 2, .pad_h = 2, .pad_w = 1, .dilation_h = 2,
                                        .dilation_w = 1, .groups = 2}},
};

std::vector<Tensor<double>> conv_inputs(const ConvCase& c, std::uint64_t seed) {
  std::vector<Tensor<double>> inputs{random_tensor(c.x, seed), random_tensor(c.weight, seed + 1)};
  if (c.bias) inputs.push_back(random_tensor({c.weight[0]}, seed + 2));
  return inputs;
}

template <class V>
V conv_of(const std::vector<V>& v, const Conv2dOptions& options) {
  return conv2d(v[0], v[1], v.size() > 2 ? v[2] : V(), options);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(device_spatial_ops_test)

BOOST_AUTO_TEST_CASE(add_matches_finite_differences_and_the_cpu) {
  const std::vector<Tensor<double>> inputs{random_tensor({3, 4, 5}, 1), random_tensor({3, 4, 5}, 2)};
  expect_gradcheck([](const EmulatedVars& v) { return add(v[0], v[1]); }, inputs);
  check_matches_cpu([](const CpuVars& v) { return v[0] + v[1]; }, [](const EmulatedVars& v) { return v[0] + v[1]; },
                    inputs);
  // x + x: both gradients land on one input, the shared one copied before the second is added.
  check_matches_cpu([](const CpuVars& v) { return add(v[0], v[0]); },
                    [](const EmulatedVars& v) { return add(v[0], v[0]); }, {inputs[0]});
}

BOOST_AUTO_TEST_CASE(add_rejects_different_shapes_as_the_cpu_op) {
  const Emulated a(Tensor<double>::zeros({2, 3}).to<HostEmulated>());
  const Emulated b(Tensor<double>::zeros({3, 2}).to<HostEmulated>());
  const std::string message = test::error_message([&] { (void)add(a, b); });
  BOOST_TEST(message.find("add: shapes [2, 3] and [3, 2] differ") != std::string::npos, message);
}

BOOST_AUTO_TEST_CASE(reshape_and_flatten_are_views_with_the_cpu_gradients) {
  const std::vector<Tensor<double>> inputs{random_tensor({2, 3, 2, 2}, 3)};
  // Multiplied by a weight afterwards, so the gradient handed back through the view is not all ones.
  const auto cpu = [](const CpuVars& v) { return relu(reshape(flatten(v[0]), {4, -1})); };
  const auto emulated = [](const EmulatedVars& v) { return relu(reshape(flatten(v[0]), {4, -1})); };
  expect_gradcheck(emulated, inputs);
  check_matches_cpu(cpu, emulated, inputs);
  const Emulated x(inputs[0].to<HostEmulated>(), true);
  const Emulated flat = flatten(x, 2);
  BOOST_TEST(flat.shape() == Shape({2, 3, 4}));
  BOOST_TEST(flat.value().shares_storage_with(x.value()));
  BOOST_TEST(reshape(x, Shape{6, 4}).value().shares_storage_with(x.value()));
}

BOOST_AUTO_TEST_CASE(conv2d_matches_the_cpu) {
  std::uint64_t seed = 10;
  for (const ConvCase& c : conv_cases) {
    BOOST_TEST_CONTEXT("x " << c.x << ", weight " << c.weight << ", bias " << c.bias) {
      check_matches_cpu([&](const CpuVars& v) { return conv_of(v, c.options); },
                        [&](const EmulatedVars& v) { return conv_of(v, c.options); }, conv_inputs(c, seed += 3));
    }
  }
}

BOOST_AUTO_TEST_CASE(conv2d_matches_finite_differences) {
  const ConvCase small{{2, 2, 5, 4}, {4, 1, 3, 2}, true,
                       {.stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1, .dilation_h = 1, .dilation_w = 2,
                        .groups = 2}};
  expect_gradcheck([&](const EmulatedVars& v) { return conv_of(v, small.options); }, conv_inputs(small, 20));
  const ConvCase plain{{1, 2, 4, 4}, {3, 2, 3, 3}, false, Conv2dOptions::square(1, 1)};
  expect_gradcheck([&](const EmulatedVars& v) { return conv_of(v, plain.options); }, conv_inputs(plain, 23));
}

BOOST_AUTO_TEST_CASE(conv2d_checks_its_arguments_as_the_cpu_op) {
  const Emulated x(Tensor<double>::zeros({1, 2, 4, 4}).to<HostEmulated>());
  const Emulated w(Tensor<double>::zeros({3, 2, 3, 3}).to<HostEmulated>());
  const Emulated bad_bias(Tensor<double>::zeros({2}).to<HostEmulated>());
  const std::string message = test::error_message([&] { (void)conv2d(x, w, bad_bias); });
  BOOST_TEST(message.find("conv2d: bias [2]") != std::string::npos, message);
  BOOST_TEST(message.find("expected [3]") != std::string::npos, message);
}

// batch_norm on both devices from the same inputs and running statistics: outputs, gradients and
// the updated running statistics agree.
void check_batch_norm_matches_cpu(const Shape& x_shape, bool affine, bool training, std::uint64_t seed) {
  const std::int64_t C = x_shape[1];
  const Tensor<double> mean0 = random_tensor({C}, seed + 5), var0 = random_tensor({C}, seed + 6, 0.5, 2);
  Tensor<double> cpu_mean = mean0.clone(), cpu_var = var0.clone();
  Tensor<double, HostEmulated> mean = mean0.to<HostEmulated>(), var = var0.to<HostEmulated>();
  std::vector<Tensor<double>> inputs{random_tensor(x_shape, seed, -2, 3)};
  if (affine) {
    inputs.push_back(random_tensor({C}, seed + 1));
    inputs.push_back(random_tensor({C}, seed + 2));
  }
  check_matches_cpu(
      [&](const CpuVars& v) {
        return batch_norm(v[0], affine ? v[1] : Var<double>(), affine ? v[2] : Var<double>(), cpu_mean, cpu_var,
                          training, 0.2);
      },
      [&](const EmulatedVars& v) {
        return batch_norm(v[0], affine ? v[1] : Emulated(), affine ? v[2] : Emulated(), mean, var, training, 0.2);
      },
      inputs);
  BOOST_TEST(relative_difference(mean.to<Cpu>(), cpu_mean) <= 1e-12);
  BOOST_TEST(relative_difference(var.to<Cpu>(), cpu_var) <= 1e-12);
  if (training) BOOST_TEST(relative_difference(cpu_var, var0) > 1e-3);  // the update happened
}

BOOST_AUTO_TEST_CASE(batch_norm_matches_the_cpu_with_its_running_statistics) {
  for (bool training : {true, false}) {
    BOOST_TEST_CONTEXT("training " << training) {
      check_batch_norm_matches_cpu({3, 4, 5, 3}, true, training, 30);
      check_batch_norm_matches_cpu({6, 5}, true, training, 40);
      check_batch_norm_matches_cpu({2, 3, 2, 3}, false, training, 50);
    }
  }
}

BOOST_AUTO_TEST_CASE(batch_norm_without_running_statistics_trains) {
  const std::vector<Tensor<double>> inputs{random_tensor({4, 3, 2, 2}, 60), random_tensor({3}, 61),
                                           random_tensor({3}, 62)};
  check_matches_cpu(
      [](const CpuVars& v) {
        Tensor<double> none;
        return batch_norm(v[0], v[1], v[2], none, none, true);
      },
      [](const EmulatedVars& v) {
        Tensor<double, HostEmulated> none;
        return batch_norm(v[0], v[1], v[2], none, none, true);
      },
      inputs);
}

BOOST_AUTO_TEST_CASE(batch_norm_matches_finite_differences) {
  for (bool training : {true, false}) {
    Tensor<double, HostEmulated> mean = random_tensor({3}, 70).to<HostEmulated>();
    Tensor<double, HostEmulated> var = random_tensor({3}, 71, 0.5, 2).to<HostEmulated>();
    expect_gradcheck(
        [&](const EmulatedVars& v) { return batch_norm(v[0], v[1], v[2], mean, var, training); },
        {random_tensor({3, 3, 2, 2}, 72), random_tensor({3}, 73), random_tensor({3}, 74)});
  }
}

BOOST_AUTO_TEST_CASE(batch_norm_checks_its_arguments_as_the_cpu_op) {
  const Emulated x(random_tensor({1, 2}, 80).to<HostEmulated>());
  Tensor<double, HostEmulated> mean = Tensor<double>::zeros({2}).to<HostEmulated>();
  Tensor<double, HostEmulated> var = Tensor<double>::ones({2}).to<HostEmulated>();
  BOOST_TEST(test::error_message([&] { (void)batch_norm(x, Emulated(), Emulated(), mean, var, true); })
                 .find("expected more than 1 value per channel") != std::string::npos);
  Tensor<double, HostEmulated> short_var = Tensor<double>::ones({3}).to<HostEmulated>();
  BOOST_TEST(test::error_message([&] { (void)batch_norm(x, Emulated(), Emulated(), mean, short_var, false); })
                 .find("batch_norm: running_var [3]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_pool2d_matches_finite_differences_and_the_cpu) {
  // ResNet's stem pool (3, 2, 1) and a ceil-mode rectangular one.
  const Pool2dOptions rect{.kernel_h = 2, .kernel_w = 3, .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                           .ceil_mode = true};
  const std::vector<Tensor<double>> inputs{random_tensor({2, 3, 7, 6}, 90)};
  check_matches_cpu([](const CpuVars& v) { return max_pool2d(v[0], 3, 2, 1); },
                    [](const EmulatedVars& v) { return max_pool2d(v[0], 3, 2, 1); }, inputs);
  check_matches_cpu([&](const CpuVars& v) { return max_pool2d(v[0], rect); },
                    [&](const EmulatedVars& v) { return max_pool2d(v[0], rect); }, inputs);
  // Distinct values, so no tie moves the maximum under a small perturbation.
  expect_gradcheck([](const EmulatedVars& v) { return max_pool2d(v[0], 3, 2, 1); }, {random_tensor({1, 2, 5, 5}, 91)});
}

BOOST_AUTO_TEST_CASE(adaptive_avg_pool2d_matches_finite_differences_and_the_cpu) {
  const std::vector<Tensor<double>> inputs{random_tensor({2, 3, 7, 5}, 100)};
  for (auto [oh, ow] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 2}, {7, 5}}) {
    check_matches_cpu([&](const CpuVars& v) { return adaptive_avg_pool2d(v[0], oh, ow); },
                      [&](const EmulatedVars& v) { return adaptive_avg_pool2d(v[0], oh, ow); }, inputs);
  }
  expect_gradcheck([](const EmulatedVars& v) { return adaptive_avg_pool2d(v[0], 2, 3); },
                   {random_tensor({1, 2, 5, 4}, 101)});
  const Emulated x(Tensor<double>::zeros({2, 3}).to<HostEmulated>());
  BOOST_TEST(test::error_message([&] { (void)adaptive_avg_pool2d(x, 1, 1); })
                 .find("adaptive_avg_pool2d: input must be [N, C, H, W], got [2, 3]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_residual_network_matches_the_cpu) {
  const std::vector<std::int64_t> targets{1, 0, 2};
  auto cpu_running = test::fresh_running_statistics<double, Cpu>(4);
  auto running = test::fresh_running_statistics<double, HostEmulated>(4);
  check_matches_cpu([&](const CpuVars& v) { return test::residual_net(v, cpu_running, targets); },
                    [&](const EmulatedVars& v) { return test::residual_net(v, running, targets); },
                    test::residual_net_inputs({3, 2, 8, 8}, 4, 3, 110));
  for (std::size_t i = 0; i < running.size(); ++i)
    BOOST_TEST(relative_difference(running[i].to<Cpu>(), cpu_running[i]) <= 1e-12, "running statistic " << i);
}

BOOST_AUTO_TEST_CASE(a_residual_step_in_float_matches_the_cpu) {
  // The step the CUDA check runs on Var<float, Cuda>, here on HostEmulated.
  std::vector<Tensor<float>> inputs;
  for (const auto& t : test::residual_net_inputs({4, 3, 9, 7}, 5, 4, 120)) inputs.push_back(tensor_cast<float>(t));
  const std::vector<std::int64_t> targets{3, 0, 1, 2};
  const auto cpu = test::residual_step<float, Cpu>(inputs, targets);
  const auto emulated = test::residual_step<float, HostEmulated>(inputs, targets);
  BOOST_TEST(relative_difference(emulated.loss, cpu.loss) <= 1e-5);
  BOOST_REQUIRE_EQUAL(emulated.grads.size(), 9u);
  for (std::size_t i = 0; i < cpu.grads.size(); ++i)
    BOOST_TEST(relative_difference(emulated.grads[i], cpu.grads[i]) <= 1e-5, "gradient of input " << i);
  for (std::size_t i = 0; i < cpu.running.size(); ++i)
    BOOST_TEST(relative_difference(emulated.running[i], cpu.running[i]) <= 1e-5, "running statistic " << i);
}

BOOST_AUTO_TEST_SUITE_END()
