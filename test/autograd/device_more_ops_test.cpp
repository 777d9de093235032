// The rest of the device-generic ops (avg_pool2d, conv_transpose2d, upsample, sigmoid, softmax,
// log_softmax, scale, concat, sum, mean, nll_loss, mse_loss, binary_cross_entropy_with_logits,
// dropout) on HostEmulated,
// the GPU algorithms run by HostExecutor: equal to the CPU ops in float and double, finite-difference
// gradchecks in double, and the CPU ops' argument checks.
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/device_ops/activation.hpp>
#include <ptrain/autograd/device_ops/arithmetic.hpp>
#include <ptrain/autograd/device_ops/conv.hpp>
#include <ptrain/autograd/device_ops/dropout.hpp>
#include <ptrain/autograd/device_ops/loss.hpp>
#include <ptrain/autograd/device_ops/pool.hpp>
#include <ptrain/autograd/device_ops/reduce.hpp>
#include <ptrain/autograd/device_ops/softmax.hpp>
#include <ptrain/autograd/device_ops/upsample.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/autograd/ops/dropout.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/pool.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/autograd/ops/upsample.hpp>

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

// A constant argument (pos_weight) as the scalar type and on the device of the variable type V.
template <class V>
auto constant_like(const Tensor<double>& t) {
  using Value = std::decay_t<decltype(std::declval<V>().value())>;
  const auto cast = tensor_cast<typename Value::value_type>(t).clone();
  if constexpr (std::is_same_v<typename Value::device_type, Cpu>) return cast;
  else return cast.template to<typename Value::device_type>();
}

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

BOOST_AUTO_TEST_CASE(scale_matches_the_cpu_and_finite_differences) {
  check_op([](const auto& v) { return scale(v[0], 2.5) + (-0.5) * v[0] + v[0] * 3.0; }, {random_tensor({4, 5}, 30)});
}

BOOST_AUTO_TEST_CASE(concat_matches_the_cpu_along_each_dimension) {
  // Along dim 0 each input's gradient is a view of the output's; along the others, a copy.
  check_op([](const auto& v) { return concat({v[0], v[1], v[2]}, 0); },
           {random_tensor({2, 3, 2}, 31), random_tensor({1, 3, 2}, 32), random_tensor({3, 3, 2}, 33)});
  check_op([](const auto& v) { return concat({v[0], v[1]}, 1); },
           {random_tensor({2, 3, 2}, 34), random_tensor({2, 1, 2}, 35)});
  check_op([](const auto& v) { return concat({v[0], v[1], v[0]}, -1); },
           {random_tensor({2, 3, 2}, 36), random_tensor({2, 3, 4}, 37)});
  const Tensor<double> a = random_tensor({2, 3}, 38), b = random_tensor({3, 3}, 39);
  expect_same_error([&] { (void)concat({Var<double>(a), Var<double>(b)}, 1); },
                    [&] { (void)concat({emulated(a), emulated(b)}, 1); });
}

BOOST_AUTO_TEST_CASE(sum_and_mean_match_the_cpu_and_finite_differences) {
  const std::vector<Tensor<double>> inputs{random_tensor({3, 4, 5}, 44)};
  check_op([](const auto& v) { return sum(v[0]); }, inputs);
  check_op([](const auto& v) { return mean(v[0]); }, inputs);
  const Tensor<double> empty({2, 0});
  expect_same_error([&] { (void)mean(Var<double>(empty)); }, [&] { (void)mean(emulated(empty)); });
}

BOOST_AUTO_TEST_CASE(nll_loss_matches_the_cpu_and_finite_differences) {
  const std::vector<std::int64_t> rows{2, 0, 4, 1, 3}, pixels{1, 0, 2, 2, 1, 0};
  check_op([&](const auto& v) { return nll_loss(v[0], rows); }, {random_tensor({5, 5}, 45)});
  check_op([&](const auto& v) { return nll_loss(v[0], pixels); }, {random_tensor({2, 3, 3}, 46)});  // [N, C, d]
  const Tensor<double> x = random_tensor({2, 3}, 47);
  const std::vector<std::int64_t> bad{0, 3};
  expect_same_error([&] { (void)nll_loss(Var<double>(x), bad); }, [&] { (void)nll_loss(emulated(x), bad); });
}

BOOST_AUTO_TEST_CASE(mse_loss_matches_the_cpu_and_finite_differences) {
  check_op([](const auto& v) { return mse_loss(v[0], v[1]); }, {random_tensor({3, 5}, 40), random_tensor({3, 5}, 41)});
  const Tensor<double> a = random_tensor({2, 3}, 42), b = random_tensor({3, 2}, 43);
  expect_same_error([&] { (void)mse_loss(Var<double>(a), Var<double>(b)); },
                    [&] { (void)mse_loss(emulated(a), emulated(b)); });
}

BOOST_AUTO_TEST_CASE(binary_cross_entropy_with_logits_matches_the_cpu_and_finite_differences) {
  const auto bce = [](const auto& v) { return binary_cross_entropy_with_logits(v[0], v[1]); };
  check_op(bce, {random_tensor({4, 3}, 50, -6, 6), random_tensor({4, 3}, 51, 0, 1)});
  // pos_weight per class of [N, C] logits, and per channel ([C, 1, 1]) of [N, C, H, W] ones.
  for (const auto& [shape, weight_shape] : {std::pair{Shape{4, 3}, Shape{3}}, std::pair{Shape{2, 3, 2, 2}, Shape{3, 1, 1}}}) {
    BOOST_TEST_CONTEXT("logits " << shape << ", pos_weight " << weight_shape) {
      const Tensor<double> pos_weight = random_tensor(weight_shape, 52, 0.5, 3);
      check_op(
          [&](const auto& v) {
            return binary_cross_entropy_with_logits(v[0], v[1], constant_like<std::decay_t<decltype(v[0])>>(pos_weight));
          },
          {random_tensor(shape, 53, -3, 3), random_tensor(shape, 54, 0, 1)});
    }
  }
  const Tensor<double> x = random_tensor({2, 3}, 55), bad_weight = random_tensor({2}, 56);
  expect_same_error([&] { (void)binary_cross_entropy_with_logits(Var<double>(x), Var<double>(x), bad_weight); },
                    [&] {
                      (void)binary_cross_entropy_with_logits(emulated(x), emulated(x),
                                                             bad_weight.to<HostEmulated>());
                    });
}

BOOST_AUTO_TEST_CASE(upsample_matches_the_cpu_and_finite_differences) {
  const std::vector<UpsampleOptions> cases{
      UpsampleOptions::by_scale(2),
      UpsampleOptions::to_size(5, 7),
      UpsampleOptions::by_scale(1.5, UpsampleMode::bilinear),
      UpsampleOptions::to_size(7, 3, UpsampleMode::bilinear, true),
  };
  for (const UpsampleOptions& o : cases) {
    BOOST_TEST_CONTEXT("bilinear " << (o.mode == UpsampleMode::bilinear) << ", size " << o.out_h << "x" << o.out_w
                                   << ", scale " << o.scale_h << ", align_corners " << o.align_corners) {
      check_op([&o](const auto& v) { return upsample(v[0], o); }, {random_tensor({2, 3, 3, 4}, 60)});
    }
  }
  const Tensor<double> x = random_tensor({1, 1, 2, 2}, 61);
  const UpsampleOptions nearest_aligned = UpsampleOptions::by_scale(2, UpsampleMode::nearest, true);
  expect_same_error([&] { (void)upsample(Var<double>(x), nearest_aligned); },
                    [&] { (void)upsample(emulated(x), nearest_aligned); });
}

BOOST_AUTO_TEST_CASE(dropout_draws_the_cpu_mask_from_the_same_rng) {
  const auto drop = [](const auto& v) {
    Rng rng(70);
    return dropout(v[0], 0.3, true, rng);
  };
  const Tensor<double> x = random_tensor({6, 7}, 71, 0.5, 1);  // no zeros of its own
  check_op(drop, {x});
  const Tensor<double> y = drop(std::vector<Emulated>{emulated(x)}).value().to<Cpu>();
  std::int64_t dropped = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) dropped += y[i] == 0.0;
  BOOST_TEST(dropped > 0);
  BOOST_TEST(dropped < y.numel());
  // p = 1 drops everything; evaluation and p = 0 pass the input through.
  check_op([](const auto& v) { return dropout(v[0], 1.0, true); }, {x});
  const Emulated e = emulated(x);
  BOOST_TEST(dropout(e, 0.5, false).node() == e.node());
  BOOST_TEST(dropout(e, 0.0, true).node() == e.node());
  expect_same_error([&] { (void)dropout(Var<double>(x), 1.5, true); }, [&] { (void)dropout(e, 1.5, true); });
}

BOOST_AUTO_TEST_SUITE_END()
