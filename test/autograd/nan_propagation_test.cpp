// NaN and inf go through every op as they do in PyTorch: a NaN weight or pixel must reach the loss,
// where the Trainer sees it, instead of vanishing into a finite number (relu's x > 0 ? x : 0 did).
// Each case runs on the CPU kernels and on the indexed ones (HostEmulated), which the GPU runs.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/accuracy.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/pool.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/kernels/functors.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(nan_propagation_test)

namespace {
constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_f = std::numeric_limits<float>::infinity();

template <class D>
Var<float, D> leaf(const Shape& shape, const std::vector<float>& values) {
  return Var<float, D>(on_device<D>(Tensor<float>::from(shape, values)), true);
}
// Element by element, NaN where expected is NaN and equal elsewhere.
void check_same(const std::vector<float>& got, const std::vector<float>& expected, const char* what) {
  BOOST_REQUIRE_EQUAL(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = std::isnan(expected[i]) ? std::isnan(got[i]) : got[i] == expected[i];
    BOOST_TEST(same, what << ": element " << i << " is " << got[i] << ", expected " << expected[i]);
  }
}
template <class D>
bool is_nan_scalar(const Var<float, D>& v) {
  return std::isnan(v.value().to_vector()[0]);
}
template <class T>
bool is_nan(T x) {
  return x != x;
}
}  // namespace

// torch.relu(tensor([nan, -1, 2, -0., inf, -inf])) = [nan, 0, 2, 0, inf, 0]; its gradient passes
// where the output is not <= 0 (threshold_backward), so the NaN's too.
BOOST_AUTO_TEST_CASE_TEMPLATE(relu_keeps_nan_as_pytorch, D, test::Devices) {
  const auto x = leaf<D>({6}, {nan_f, -1, 2, -0.f, inf_f, -inf_f});
  const auto y = relu(x);
  check_same(y.value().to_vector(), {nan_f, 0, 2, 0, inf_f, 0}, "relu");
  BOOST_TEST(!std::signbit(y.value().to_vector()[3]));
  backward(sum(y));
  check_same(x.grad().to_vector(), {1, 0, 1, 0, 1, 0}, "relu's gradient");
}

BOOST_AUTO_TEST_CASE(relu_keeps_nan_in_16_bit_types) {
  const kernels::Relu relu_of;
  const kernels::ReluBackward relu_backward;
  for (float v : {nan_f, -nan_f}) {
    BOOST_TEST(is_nan(relu_of(ptrain::half(v))));
    BOOST_TEST(is_nan(relu_of(ptrain::bfloat16(v))));
    BOOST_TEST(static_cast<float>(relu_backward(ptrain::half(v), ptrain::half(2.f))) == 2.f);
    BOOST_TEST(static_cast<float>(relu_backward(ptrain::bfloat16(v), ptrain::bfloat16(2.f))) == 2.f);
  }
  for (float v : {-inf_f, -1.f, -0.f, 0.f}) {
    BOOST_TEST(static_cast<float>(relu_of(ptrain::half(v))) == 0.f);
    BOOST_TEST(static_cast<float>(relu_of(ptrain::bfloat16(v))) == 0.f);
    BOOST_TEST(static_cast<float>(relu_backward(ptrain::bfloat16(v), ptrain::bfloat16(2.f))) == 0.f);
  }
  for (float v : {0.5f, 3.f, inf_f}) {
    BOOST_TEST(static_cast<float>(relu_of(ptrain::half(v))) == v);
    BOOST_TEST(static_cast<float>(relu_of(ptrain::bfloat16(v))) == v);
    BOOST_TEST(static_cast<float>(relu_backward(ptrain::half(v), ptrain::half(2.f))) == 2.f);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(max_pool_propagates_nan_from_any_place_in_the_window, D, test::Devices) {
  // [1, 1, 2, 4] in 2 x 2 windows: the NaN first, last, or none.
  const auto x = leaf<D>({1, 1, 2, 4}, {nan_f, 1, 5, 2, 3, 4, 6, nan_f});
  check_same(max_pool2d(x, 2).value().to_vector(), {nan_f, nan_f}, "max_pool2d");
  const auto finite = leaf<D>({1, 1, 2, 2}, {1, 4, 3, 2});
  check_same(max_pool2d(finite, 2).value().to_vector(), {4}, "max_pool2d without NaN");
}

// torch.argmax: a NaN is the largest score, the first of several NaNs wins.
BOOST_AUTO_TEST_CASE_TEMPLATE(argmax_takes_nan_as_the_largest_score, D, test::Devices) {
  const auto scores = on_device<D>(Tensor<float>::from({4, 4}, {1, nan_f, 3, nan_f,      //
                                                              nan_f, nan_f, nan_f, nan_f,  //
                                                              -inf_f, -inf_f, -inf_f, -inf_f,  //
                                                              2, inf_f, nan_f, 0}));
  BOOST_TEST(argmax_classes(scores) == (std::vector<std::int64_t>{1, 0, 0, 2}));
  BOOST_TEST(top1_correct(scores, std::vector<std::int64_t>{1, 0, 0, 1}) == 3);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(softmax_of_a_row_with_nan_is_nan, D, test::Devices) {
  const auto x = leaf<D>({2, 3}, {1, nan_f, 2, 0, 1, 2});
  for (bool take_log : {false, true}) {
    const auto y = (take_log ? log_softmax(x, 1) : softmax(x, 1)).value().to_vector();
    for (int i = 0; i < 3; ++i) BOOST_TEST(std::isnan(y[i]), "row 0, element " << i);
    for (int i = 3; i < 6; ++i) BOOST_TEST(std::isfinite(y[i]), "row 1, element " << i);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(losses_of_nan_inputs_are_nan, D, test::Devices) {
  // A NaN off the target class, in rows and in [N, C, d] positions, with and without smoothing.
  const auto rows = leaf<D>({2, 3}, {1, 2, nan_f, 0, 1, 2});
  const auto positions = leaf<D>({1, 3, 2}, {1, 0, nan_f, 2, 3, 1});
  for (double smoothing : {0.0, 0.1}) {
    BOOST_TEST(is_nan_scalar(cross_entropy(rows, std::vector<std::int64_t>{0, 1}, smoothing)));
    BOOST_TEST(is_nan_scalar(cross_entropy(positions, std::vector<std::int64_t>{0, 2}, smoothing)));
  }
  const auto loss = cross_entropy(rows, std::vector<std::int64_t>{0, 1});
  backward(loss);
  BOOST_TEST(std::isnan(rows.grad().to_vector()[0]));
  BOOST_TEST(is_nan_scalar(nll_loss(rows, std::vector<std::int64_t>{2, 0})));
  const auto target = leaf<D>({2, 3}, {0, 1, 0, 1, 0, 1});
  BOOST_TEST(is_nan_scalar(mse_loss(rows, target)));
  BOOST_TEST(is_nan_scalar(binary_cross_entropy_with_logits(rows, target)));
  const auto inf_logits = leaf<D>({1, 2}, {inf_f, -inf_f});
  BOOST_TEST(std::isinf(mse_loss(inf_logits, leaf<D>({1, 2}, {0, 0})).value().to_vector()[0]));
}

// A NaN in one channel makes that channel's output and running statistics NaN (the variance is
// clamped at 0 against rounding, which must not turn NaN into 0); the other channel stays finite.
BOOST_AUTO_TEST_CASE_TEMPLATE(batch_norm_keeps_nan_in_its_channel, D, test::Devices) {
  const auto x = leaf<D>({2, 2, 1, 2}, {1, nan_f, 3, 4, 5, 6, 7, 9});
  const Var<float, D> weight(on_device<D>(Tensor<float>::ones({2})), true), bias(on_device<D>(Tensor<float>::zeros({2})), true);
  Tensor<float, D> running_mean = on_device<D>(Tensor<float>::zeros({2}));
  Tensor<float, D> running_var = on_device<D>(Tensor<float>::ones({2}));
  const auto y = batch_norm(x, weight, bias, running_mean, running_var, true).value().to_vector();
  // channel 0 holds elements 0, 1, 4, 5; channel 1 elements 2, 3, 6, 7
  for (int i : {0, 1, 4, 5}) BOOST_TEST(std::isnan(y[i]), "channel 0, element " << i);
  for (int i : {2, 3, 6, 7}) BOOST_TEST(std::isfinite(y[i]), "channel 1, element " << i);
  const auto mean = running_mean.to_vector(), var = running_var.to_vector();
  BOOST_TEST(std::isnan(mean[0]));
  BOOST_TEST(std::isnan(var[0]));
  BOOST_TEST(std::isfinite(mean[1]));
  BOOST_TEST(std::isfinite(var[1]));
}

BOOST_AUTO_TEST_SUITE_END()
