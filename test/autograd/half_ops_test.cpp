// The ops of the demo CNN and ResNet in half and bfloat16 against the same ops in float, on inputs
// that both types hold exactly; and sums that only come out right when they add up in float.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/accuracy.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/autograd/ops/dropout.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/pool.hpp>
#include <ptrain/autograd/ops/shape.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(half_ops_test)

namespace {

// Four times the unit roundoff (2^-11 for half, 2^-9 for bfloat16): each value is the float result
// rounded once, or float math on a rounded intermediate. Measured worst: 1.1 (half) and 1.9
// (bfloat16) units.
template <class T>
constexpr double tolerance = std::is_same_v<T, ptrain::half> ? 2e-3 : 8e-3;

// Uniform in [lo, hi), rounded to T (so float and T see the very same numbers).
template <class T>
Tensor<float> representable(const Shape& shape, std::uint64_t seed, double lo = -1, double hi = 1) {
  return tensor_cast<float>(tensor_cast<T>(tensor_cast<float>(random_tensor(shape, seed, lo, hi))));
}

// max |got - expected| / max |expected|: rounding errors measured against the tensor's scale.
double relative_error(const Tensor<float>& got, const Tensor<float>& expected) {
  BOOST_REQUIRE(got.shape() == expected.shape());
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - static_cast<double>(expected[i])));
    scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
  }
  return scale > 0 ? worst / scale : worst;
}

// The output and every input's gradient (given the same upstream gradient) of f in U.
template <class U, class F>
std::vector<Tensor<float>> run(F&& f, const std::vector<Tensor<float>>& inputs, std::uint64_t seed) {
  std::vector<Var<U>> vars;
  for (const auto& x : inputs) vars.emplace_back(tensor_cast<U>(x), true);
  const Var<U> y = f(vars);
  std::vector<Tensor<float>> out{tensor_cast<float>(y.value())};
  const Tensor<float> upstream = y.numel() == 1 ? Tensor<float>::ones(y.shape()) : tensor_cast<float>(
      tensor_cast<ptrain::bfloat16>(tensor_cast<float>(random_tensor(y.shape(), seed))));
  backward(y, tensor_cast<U>(upstream));
  for (const auto& v : vars) out.push_back(tensor_cast<float>(v.grad()));
  return out;
}

// f (a generic lambda over std::vector<Var<U>>) in T against float: output and input gradients.
template <class T, class F>
void check_against_float(const char* what, F f, const std::vector<Tensor<float>>& inputs, double tol = tolerance<T>) {
  const auto expected = run<float>(f, inputs, 99);
  const auto got = run<T>(f, inputs, 99);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = relative_error(got[i], expected[i]);
    BOOST_TEST(error <= tol, scalar_name<T> << " " << what << (i == 0 ? " output" : " gradient of input ")
                                            << (i == 0 ? "" : std::to_string(i - 1)) << ": relative error " << error
                                            << " > " << tol);
  }
}

template <class T>
void check_all_ops() {
  check_against_float<T>("linear", [](const auto& v) { return linear(v[0], v[1], v[2]); },
                         {representable<T>({16, 300}, 1), representable<T>({20, 300}, 2, -0.1, 0.1),
                          representable<T>({20}, 3)});
  check_against_float<T>("matmul", [](const auto& v) { return matmul(v[0], v[1]); },
                         {representable<T>({7, 33}, 4), representable<T>({33, 5}, 5)});
  const struct {
    Shape x, w;
    Conv2dOptions options;
  } convs[] = {
      {{4, 3, 10, 10}, {8, 3, 3, 3}, Conv2dOptions::square(1, 1)},      // col2im input gradient
      {{2, 16, 8, 8}, {16, 16, 3, 3}, Conv2dOptions::square(1, 1)},     // input gradient as a convolution
      {{3, 8, 9, 9}, {12, 8, 3, 3}, Conv2dOptions::square(2, 1)},       // stride 2
      {{2, 16, 6, 6}, {8, 16, 1, 1}, Conv2dOptions::square(1, 0)},      // pointwise
      {{2, 8, 7, 7}, {8, 2, 3, 3}, Conv2dOptions::square(1, 1, 1, 4)},  // groups
  };
  for (const auto& c : convs) {
    const Conv2dOptions options = c.options;
    check_against_float<T>("conv2d",
                           [options](const auto& v) { return conv2d(v[0], v[1], v[2], options); },
                           {representable<T>(c.x, 6), representable<T>(c.w, 7, -0.3, 0.3),
                            representable<T>({c.w[0]}, 8)});
  }
  check_against_float<T>("max_pool2d", [](const auto& v) { return max_pool2d(v[0], 2); },
                         {representable<T>({2, 3, 8, 8}, 9)});
  check_against_float<T>("max_pool2d 3/2/1", [](const auto& v) { return max_pool2d(v[0], 3, 2, 1); },
                         {representable<T>({2, 3, 9, 9}, 10)});
  check_against_float<T>("avg_pool2d", [](const auto& v) { return avg_pool2d(v[0], 3, 2, 1); },
                         {representable<T>({2, 3, 9, 9}, 11)});
  // 1024 values near 1 per plane: a 16-bit running sum would stall (bfloat16 at 256).
  check_against_float<T>("adaptive_avg_pool2d global", [](const auto& v) { return adaptive_avg_pool2d(v[0], 1, 1); },
                         {representable<T>({2, 3, 32, 32}, 12, 0.9, 1.1)});
  check_against_float<T>("adaptive_avg_pool2d 3x3", [](const auto& v) { return adaptive_avg_pool2d(v[0], 3, 3); },
                         {representable<T>({2, 3, 7, 7}, 13)});
  check_against_float<T>("relu", [](const auto& v) { return relu(v[0]); }, {representable<T>({5, 40}, 14)});
  check_against_float<T>("add", [](const auto& v) { return add(v[0], v[1]); },
                         {representable<T>({3, 4, 5}, 15), representable<T>({3, 4, 5}, 16)});
  check_against_float<T>("flatten", [](const auto& v) { return flatten(v[0], 1); }, {representable<T>({3, 4, 5}, 17)});
  check_against_float<T>("reshape", [](const auto& v) { return reshape(v[0], {4, -1}); },
                         {representable<T>({2, 4, 6}, 18)});
  check_against_float<T>("dropout", [](const auto& v) {
    Rng rng(21);
    return dropout(v[0], 0.25, true, rng);
  }, {representable<T>({6, 50}, 19)});
  check_against_float<T>("softmax", [](const auto& v) { return softmax(v[0], 1); }, {representable<T>({6, 10}, 20, -4, 4)});
  check_against_float<T>("log_softmax", [](const auto& v) { return log_softmax(v[0], 1); },
                         {representable<T>({6, 10}, 21, -4, 4)});
  const std::vector<std::int64_t> targets{3, 0, 9, 9, 1, 4, 7, 2};
  check_against_float<T>("cross_entropy", [&](const auto& v) { return cross_entropy(v[0], targets); },
                         {representable<T>({8, 10}, 22, -4, 4)});
  check_against_float<T>("cross_entropy smoothed", [&](const auto& v) { return cross_entropy(v[0], targets, 0.1); },
                         {representable<T>({8, 10}, 23, -4, 4)});
  // Batch norm in training, 4D with 4096 values per channel around 3 (a 16-bit sum could not hold
  // the mean), and 2D; then evaluation with the running statistics it left.
  for (const Shape& shape : {Shape{64, 2, 8, 8}, Shape{32, 5}}) {
    Tensor<float> rm32 = Tensor<float>::zeros({shape[1]}), rv32 = Tensor<float>::ones({shape[1]});
    Tensor<T> rm16 = Tensor<T>::zeros({shape[1]}), rv16 = Tensor<T>::ones({shape[1]});
    auto bn = [&](const auto& v) {
      using U = typename std::decay_t<decltype(v[0].value())>::value_type;
      if constexpr (std::is_same_v<U, float>) return batch_norm(v[0], v[1], v[2], rm32, rv32, true);
      else return batch_norm(v[0], v[1], v[2], rm16, rv16, true);
    };
    const std::vector<Tensor<float>> inputs{representable<T>(shape, 24, 2.5, 3.5),
                                            representable<T>({shape[1]}, 25, 0.5, 1.5),
                                            representable<T>({shape[1]}, 26)};
    check_against_float<T>("batch_norm training", bn, inputs);
    BOOST_TEST(relative_error(tensor_cast<float>(rm16), rm32) <= tolerance<T>);
    BOOST_TEST(relative_error(tensor_cast<float>(rv16), rv32) <= tolerance<T>);
    // Evaluation from the same (rounded) running statistics in both types.
    rm32 = tensor_cast<float>(rm16);
    rv32 = tensor_cast<float>(rv16);
    auto bn_eval = [&](const auto& v) {
      using U = typename std::decay_t<decltype(v[0].value())>::value_type;
      if constexpr (std::is_same_v<U, float>) return batch_norm(v[0], v[1], v[2], rm32, rv32, false);
      else return batch_norm(v[0], v[1], v[2], rm16, rv16, false);
    };
    check_against_float<T>("batch_norm evaluation", bn_eval, inputs);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(bfloat16_ops_match_float) { check_all_ops<ptrain::bfloat16>(); }

BOOST_AUTO_TEST_CASE(half_ops_match_float) { check_all_ops<ptrain::half>(); }

// Sums of many 16-bit numbers, v = 1 + 2^-7 each: float adds n of them exactly and the result is
// n * v rounded once; 16-bit partial sums round at every step (a bfloat16 running sum of ones
// even stops at 256).
template <class T>
void check_sums_accumulate_in_float() {
  BOOST_TEST_CONTEXT(scalar_name<T>) {
    const T v = static_cast<T>(1.0f + 1.0f / 128);
    auto sum_of = [](int n) { return static_cast<float>(static_cast<T>(n * (1.0 + 1.0 / 128))); };
    const Var<T> a(Tensor<T>::full({1, 4096}, v), true), b(Tensor<T>::ones({4096, 1}), true);
    BOOST_TEST(static_cast<float>(matmul(a, b).value()[0]) == sum_of(4096));

    // linear's weight and bias gradients sum over the batch.
    const Var<T> x(Tensor<T>::ones({4096, 2})), w(Tensor<T>::ones({3, 2}), true), bias(Tensor<T>::zeros({3}), true);
    backward(linear(x, w, bias), Tensor<T>::full({4096, 3}, v));
    BOOST_TEST(static_cast<float>(bias.grad()[0]) == sum_of(4096));
    BOOST_TEST(static_cast<float>(w.grad()[0]) == sum_of(4096));

    // conv2d's weight and bias gradients sum over images and pixels (16 x 225 here), the weight
    // gradient image by image.
    const Var<T> image(Tensor<T>::ones({16, 1, 15, 15})), kernel(Tensor<T>::ones({2, 1, 1, 1}), true),
        conv_bias(Tensor<T>::zeros({2}), true);
    backward(conv2d(image, kernel, conv_bias), Tensor<T>::full({16, 2, 15, 15}, v));
    BOOST_TEST(static_cast<float>(kernel.grad()[0]) == sum_of(3600));
    BOOST_TEST(static_cast<float>(conv_bias.grad()[1]) == sum_of(3600));

    // batch norm's mean: 4096 values of v in one channel normalise to 0 (up to float's rounding of
    // x * invstd - mean * invstd, with invstd = 1 / sqrt(eps) = 316).
    Tensor<T> running_mean = Tensor<T>::zeros({1}), running_var = Tensor<T>::ones({1});
    const Var<T> same(Tensor<T>::full({4096, 1}, v), true);
    const Var<T> y = batch_norm(same, Var<T>(), Var<T>(), running_mean, running_var, true);
    BOOST_TEST(std::abs(static_cast<float>(y.value()[7])) <= 1e-3f);
    BOOST_TEST(static_cast<float>(running_mean[0]) == static_cast<float>(static_cast<T>(0.1 * (1.0 + 1.0 / 128))));
  }
}

BOOST_AUTO_TEST_CASE(sums_accumulate_in_float) {
  check_sums_accumulate_in_float<ptrain::bfloat16>();
  check_sums_accumulate_in_float<ptrain::half>();
}

BOOST_AUTO_TEST_CASE(top1_correct_matches_float) {
  const Tensor<float> scores = representable<ptrain::bfloat16>({32, 10}, 30, -3, 3);
  std::vector<std::int64_t> targets;
  for (std::int64_t i = 0; i < 32; ++i) targets.push_back(i % 10);
  const auto expected = top1_correct(scores, targets);
  BOOST_TEST(top1_correct(tensor_cast<ptrain::bfloat16>(scores), targets) == expected);
  BOOST_TEST(top1_correct(tensor_cast<ptrain::half>(scores), targets) == expected);
  BOOST_TEST(expected > 0);
}

// grad_scale multiplies the gradient in float, beyond what a half can hold, and leaves the loss.
BOOST_AUTO_TEST_CASE(cross_entropy_grad_scale_is_applied_in_float) {
  const std::vector<std::int64_t> targets{1, 0};
  const Tensor<float> logits = representable<ptrain::half>({2, 3}, 31, -2, 2);
  const Var<float> reference(logits, true);
  backward(cross_entropy(reference, targets));
  const Var<ptrain::half> scaled(tensor_cast<ptrain::half>(logits), true);
  const Var<ptrain::half> loss = cross_entropy(scaled, targets, 0.0, 65536.0);
  BOOST_TEST(std::isfinite(static_cast<float>(loss.value()[0])));
  backward(loss);
  const Tensor<float> got = tensor_cast<float>(scaled.grad());
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    BOOST_TEST(std::isfinite(got[i]));
    BOOST_TEST(std::abs(got[i] / 65536.0f - reference.grad()[i]) <= 1e-3f * std::abs(reference.grad()[i]) + 1e-6f);
  }
}

BOOST_AUTO_TEST_SUITE_END()
