#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/device/threads.hpp>

#include "../common/compare.hpp"

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::Emulated;
using test::emulated;
using test::constant_like;
using test::relative_difference;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(loss_test)

namespace {
// ((i * a) % m - m / 2) * s: the same inputs the reference numbers were computed from in PyTorch.
Tensor<double> pattern(const Shape& shape, int a, int m, double s) {
  Tensor<double> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<double>((i * a) % m - m / 2) * s;
  return t;
}
bool message_has(const Error& e, const std::string& part) {
  return std::string(e.what()).find(part) != std::string::npos;
}
const std::vector<std::int64_t> targets{1, 0, 4, 2};
// Targets of the [2, 3, 2, 2] per-pixel case, [N, H, W] row-major.
const std::vector<std::int64_t> pixel_targets{0, 1, 2, 2, 1, 1, 0, 2};
const std::vector<std::int64_t> targets5{2, 0, 4, 1, 3};          // 5 rows, classes < 5
const std::vector<std::int64_t> pixel_targets6{1, 0, 2, 2, 1, 0};  // [2, 3, 3] scores
}  // namespace

BOOST_AUTO_TEST_CASE(cross_entropy_matches_pytorch) {
  Var<double> logits(pattern({4, 5}, 5, 13, 0.4));
  // F.cross_entropy(logits, targets) and with label_smoothing=0.1
  BOOST_TEST(std::abs(cross_entropy(logits, targets).value()[0] - 2.008914894695879) < 1e-13);
  auto smoothed = cross_entropy(logits, targets, 0.1);
  BOOST_TEST(smoothed.shape() == Shape{});
  BOOST_TEST(std::abs(smoothed.value()[0] - 2.0629148946958789) < 1e-13);
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradient_matches_pytorch_with_label_smoothing) {
  Var<double> logits(pattern({4, 5}, 5, 13, 0.4), true);
  backward(cross_entropy(logits, targets, 0.1));
  const std::vector<double> expected{
      -0.0019384278842480389, -0.20737787188578696,   0.16215617371311647,   0.0018136540491372703,
      0.045346472007781267,   -0.056983837294709794,  0.0020525201157472351, 0.047111466774093218,
      -0.0028758217617425585, 0.010695672166611905,   0.16801616270529018,   0.0020525201157472351,
      0.047111466774093218,   -0.0028758217617425585, -0.2143043278333881,   0.063339334800514138,
      -0.0022143380951155796, -0.20941658791215503,   0.14709198662449391,   0.0011996045822625654};
  for (std::int64_t i = 0; i < 20; ++i)
    BOOST_TEST(std::abs(logits.grad()[i] - expected[static_cast<std::size_t>(i)]) < 1e-14, "element " << i);
}

BOOST_AUTO_TEST_CASE(cross_entropy_per_pixel_matches_pytorch) {
  Var<double> logits(pattern({2, 3, 2, 2}, 5, 9, 0.5));
  BOOST_TEST(std::abs(cross_entropy(logits, pixel_targets).value()[0] - 1.1552663435757475) < 1e-13);
  BOOST_TEST(std::abs(cross_entropy(logits, pixel_targets, 0.1).value()[0] - 1.2052663435757476) < 1e-13);
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradients) {
  for (double eps : {0.0, 0.1}) {
    auto flat = gradcheck([eps](const auto& v) { return cross_entropy(v[0], targets, eps); },
                          {random_tensor({4, 5}, 1, -3, 3)});
    BOOST_TEST(flat.ok, "[4, 5], label_smoothing " << eps << ": " << flat.report);
    auto pixels = gradcheck([eps](const auto& v) { return cross_entropy(v[0], pixel_targets, eps); },
                            {random_tensor({2, 3, 2, 2}, 2, -3, 3)});
    BOOST_TEST(pixels.ok, "[2, 3, 2, 2], label_smoothing " << eps << ": " << pixels.report);
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_equals_nll_of_log_softmax) {
  Var<double> logits(random_tensor({6, 7}, 3, -4, 4));
  const std::vector<std::int64_t> t{0, 6, 3, 3, 1, 5};
  const double fused = cross_entropy(logits, t).value()[0];
  const double composed = nll_loss(log_softmax(logits, 1), t).value()[0];
  BOOST_TEST(std::abs(fused - composed) < 1e-14);
}

BOOST_AUTO_TEST_CASE(cross_entropy_is_stable_for_large_logits) {
  Var<float> logits(Tensor<float>::from({2, 3}, {1e4f, 0.f, -1e4f, 5e3f, 5e3f, 0.f}));
  const std::vector<std::int64_t> t{1, 0};
  // Row 0: -log p_1 = 1e4; row 1: -log p_0 = log 2.
  const float loss = cross_entropy(logits, t).value()[0];
  BOOST_TEST(std::abs(loss - (1e4f + std::log(2.f)) / 2) < 1e-2f);
}

// The float kernels on batches large enough to run threaded, against the double ones.
BOOST_AUTO_TEST_CASE(threaded_float_paths_match_double) {
  for (const Shape& shape : {Shape{256, 200}, Shape{4, 3, 64, 64}}) {
    const Tensor<double> xd = random_tensor(shape, 5, -6, 6);
    Tensor<float> xf(shape);
    for (std::int64_t i = 0; i < xd.numel(); ++i) xf[i] = static_cast<float>(xd[i]);
    const std::int64_t positions = xd.numel() / shape[1];
    std::vector<std::int64_t> t(static_cast<std::size_t>(positions));
    for (std::int64_t i = 0; i < positions; ++i) t[static_cast<std::size_t>(i)] = (i * 7) % shape[1];
    Var<double> vd(xd, true);
    Var<float> vf(xf, true);
    auto ld = cross_entropy(vd, t, 0.1);
    auto lf = cross_entropy(vf, t, 0.1);
    BOOST_TEST(std::abs(ld.value()[0] - lf.value()[0]) < 1e-5, "loss for " << shape);
    backward(ld);
    backward(lf);
    double worst = 0;
    for (std::int64_t i = 0; i < xd.numel(); ++i)
      worst = std::max(worst, std::abs(vd.grad()[i] - vf.grad()[i]));
    BOOST_TEST(worst < 1e-8, "gradient error " << worst << " for " << shape);
  }
}

BOOST_AUTO_TEST_CASE(bad_targets_are_errors) {
  Var<double> logits(random_tensor({4, 5}, 1));
  BOOST_CHECK_EXCEPTION(
      cross_entropy(logits, std::vector<std::int64_t>{1, 0, 5, 2}), Error, [](const Error& e) {
        return message_has(
            e, "cross_entropy: target 5 at index 2 is out of range for 5 classes (expected 0 <= target < 5)");
      });
  BOOST_CHECK_THROW(cross_entropy(logits, std::vector<std::int64_t>{1, -1, 0, 2}), Error);
  BOOST_CHECK_EXCEPTION(cross_entropy(logits, std::vector<std::int64_t>{1, 0, 2}), Error, [](const Error& e) {
    return message_has(e, "cross_entropy: 3 targets for scores of shape [4, 5], which need 4");
  });
  BOOST_CHECK_THROW(cross_entropy(Var<double>(random_tensor({5}, 1)), targets), Error);
  BOOST_CHECK_THROW(cross_entropy(logits, targets, 1.5), Error);
  BOOST_CHECK_EXCEPTION(nll_loss(logits, std::vector<std::int64_t>{9, 0, 0, 0}), Error, [](const Error& e) {
    return message_has(e, "nll_loss: target 9 at index 0 is out of range");
  });
}

BOOST_AUTO_TEST_CASE(nll_loss_matches_pytorch_and_its_gradient) {
  Var<double> log_probs = log_softmax(Var<double>(pattern({4, 5}, 5, 13, 0.4)), 1);
  // F.nll_loss(F.log_softmax(logits, 1), targets)
  BOOST_TEST(std::abs(nll_loss(log_probs, targets).value()[0] - 2.008914894695879) < 1e-13);
  auto flat = gradcheck([](const auto& v) { return nll_loss(v[0], targets); }, {random_tensor({4, 5}, 1)});
  BOOST_TEST(flat.ok, flat.report);
  auto pixels = gradcheck([](const auto& v) { return nll_loss(v[0], pixel_targets); },
                          {random_tensor({2, 3, 2, 2}, 2)});
  BOOST_TEST(pixels.ok, pixels.report);
}

BOOST_AUTO_TEST_CASE(mse_loss_matches_pytorch_and_its_gradient) {
  Var<double> pred(pattern({3, 4}, 3, 7, 0.25)), target(pattern({3, 4}, 5, 11, 0.2));
  // F.mse_loss(pred, target)
  BOOST_TEST(std::abs(mse_loss(pred, target).value()[0] - 0.44895833333333335) < 1e-15);
  auto r = gradcheck([](const auto& v) { return mse_loss(v[0], v[1]); },
                     {random_tensor({3, 4}, 1), random_tensor({3, 4}, 2)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(mse_loss_of_different_shapes_is_an_error) {
  BOOST_CHECK_EXCEPTION(
      mse_loss(Var<double>(random_tensor({3, 4}, 1)), Var<double>(random_tensor({4, 3}, 2))), Error,
      [](const Error& e) {
        return message_has(e, "mse_loss: prediction of shape [3, 4] and target of shape [4, 3] differ");
      });
}

// Logits 3 sin(1.3 i + 0.4) and targets (sin(0.8 i + 0.1) + 1) / 2, as in the PyTorch script.
Tensor<double> bce_logits(const Shape& shape) { return sequence(shape, 1.3, 0.4, 3.0); }
Tensor<double> bce_targets(const Shape& shape) {
  Tensor<double> t = sequence(shape, 0.8, 0.1);
  t.array() = (t.array() + 1) / 2;
  return t;
}

BOOST_AUTO_TEST_CASE(bce_with_logits_matches_pytorch) {
  const Var<double> x(bce_logits({3, 4})), t(bce_targets({3, 4}));
  // F.binary_cross_entropy_with_logits(x, t) and with pos_weight=[0.5, 1, 2, 3]
  const Var<double> plain = binary_cross_entropy_with_logits(x, t);
  BOOST_TEST(plain.shape() == Shape{});
  BOOST_TEST(std::abs(plain.value()[0] - 1.1889091032734627) < 1e-14);
  const Tensor<double> pos_weight = Tensor<double>::from({4}, {0.5, 1.0, 2.0, 3.0});
  BOOST_TEST(std::abs(binary_cross_entropy_with_logits(x, t, pos_weight).value()[0] - 1.5358295179782022) < 1e-14);
  // pos_weight [3, 1, 1] weighs the channels of [N, C, H, W], against binary targets.
  Tensor<double> pixels = sequence({2, 3, 2, 2}, 0.8, 0.1);
  for (std::int64_t i = 0; i < pixels.numel(); ++i) pixels[i] = pixels[i] > 0 ? 1.0 : 0.0;
  const Tensor<double> per_channel = Tensor<double>::from({3, 1, 1}, {0.5, 2.0, 4.0});
  BOOST_TEST(std::abs(binary_cross_entropy_with_logits(Var<double>(bce_logits({2, 3, 2, 2})), Var<double>(pixels),
                                                       per_channel)
                          .value()[0] -
                      1.904425151251892) < 1e-14);
}

BOOST_AUTO_TEST_CASE(bce_with_logits_gradients_match_pytorch) {
  Var<double> x(bce_logits({3, 4}), true), t(bce_targets({3, 4}), true);
  backward(binary_cross_entropy_with_logits(x, t, Tensor<double>::from({4}, {0.5, 1.0, 2.0, 3.0})));
  check_close(x.grad(),
              {0.02317706434646671, 0.004980677792695158, -0.06546743716137703, -0.18677951120317637,
               -0.00894133058724189, 0.06326917565250507, 0.07788309050418488, -0.002554866574355561,
               -0.022409586909396473, -0.05993124825198063, -0.014934155659090897,
               0.005516152322904626},
              1e-15);
  check_close(t.grad(),
              {-0.1086346183552242, -0.24791620261311711, 0.006695501185576297, 0.697467438279224,
               0.07306684553501634, -0.14460994109705003, -0.23036814530351993, 0.15415679722322492,
               0.12047640909203929, 0.11241186613364999, -0.17651099297269454, -0.1987512342159438},
              1e-15);
}

BOOST_AUTO_TEST_CASE(bce_with_logits_gradients) {
  const Tensor<double> x = random_tensor({2, 3, 2, 2}, 1, -4, 4), t = random_tensor({2, 3, 2, 2}, 2, 0, 1);
  auto plain = gradcheck([](const auto& v) { return binary_cross_entropy_with_logits(v[0], v[1]); }, {x, t});
  BOOST_TEST(plain.ok, plain.report);
  const Tensor<double> per_channel = Tensor<double>::from({3, 1, 1}, {0.5, 2.0, 4.0});
  auto weighted = gradcheck(
      [&](const auto& v) { return binary_cross_entropy_with_logits(v[0], v[1], per_channel); }, {x, t});
  BOOST_TEST(weighted.ok, weighted.report);
  const Tensor<double> scalar = Tensor<double>::from({}, {3.0});
  auto by_scalar = gradcheck([&](const auto& v) { return binary_cross_entropy_with_logits(v[0], v[1], scalar); },
                             {x, t});
  BOOST_TEST(by_scalar.ok, by_scalar.report);
}

BOOST_AUTO_TEST_CASE(bce_with_logits_is_stable_for_large_logits) {
  // Per element: 200, ~1e-13, log 2, ~1e-13, 200 (PyTorch: 80.13862943611204 in float64).
  Var<float> x(Tensor<float>::from({5}, {-200.f, -30.f, 0.f, 30.f, 200.f}), true);
  const Var<float> t(Tensor<float>::from({5}, {1.f, 0.f, 0.5f, 1.f, 0.f}));
  const Var<float> loss = binary_cross_entropy_with_logits(x, t);
  BOOST_TEST(std::abs(loss.value()[0] - 80.13862943611204) < 1e-4);
  backward(loss);
  // sigmoid(x) - t, over 5.
  const std::vector<float> expected{-0.2f, 0.f, 0.f, 0.f, 0.2f};
  for (std::int64_t i = 0; i < 5; ++i)
    BOOST_TEST(std::abs(x.grad()[i] - expected[static_cast<std::size_t>(i)]) < 1e-7f, "element " << i);
}

BOOST_AUTO_TEST_CASE(bce_with_logits_threaded_sum_does_not_depend_on_the_thread_count) {
  const Tensor<double> x = random_tensor({8, 1, 64, 64}, 3, -5, 5), t = random_tensor({8, 1, 64, 64}, 4, 0, 1);
  const int saved = num_threads();
  set_num_threads(1);
  const double serial = binary_cross_entropy_with_logits(Var<double>(x), Var<double>(t)).value()[0];
  set_num_threads(2);
  const double parallel = binary_cross_entropy_with_logits(Var<double>(x), Var<double>(t)).value()[0];
  set_num_threads(saved);
  BOOST_TEST(serial == parallel);
}

BOOST_AUTO_TEST_CASE(bce_with_logits_shape_errors) {
  const Var<double> x(random_tensor({2, 3}, 1)), t(random_tensor({2, 3}, 2, 0, 1));
  BOOST_CHECK_EXCEPTION(binary_cross_entropy_with_logits(x, Var<double>(random_tensor({3, 2}, 2))), Error,
                        [](const Error& e) {
                          return message_has(e, "binary_cross_entropy_with_logits: logits of shape [2, 3] and "
                                                "targets of shape [3, 2] differ");
                        });
  BOOST_CHECK_EXCEPTION(binary_cross_entropy_with_logits(x, t, Tensor<double>::ones({2})), Error, [](const Error& e) {
    return message_has(e, "shape [2] does not broadcast to [2, 3] (extent 2 against 3)");
  });
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cross_entropy_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const std::vector<Tensor<double>> rows{random_tensor({5, 5}, 5, -2, 2)};
  const std::vector<Tensor<double>> pixels{random_tensor({2, 3, 3}, 6, -2, 2)};
  for (double smoothing : {0.0, 0.1}) {
    test::expect_gradcheck_on<D>([&](const auto& v) { return cross_entropy(v[0], targets5, smoothing); }, rows);
    test::check_matches_cpu_on<D>([&](const std::vector<Var<double>>& v) { return cross_entropy(v[0], targets5, smoothing); },
                      [&](const auto& v) { return cross_entropy(v[0], targets5, smoothing); },
                      rows);
    test::check_matches_cpu_on<D>(
        [&](const std::vector<Var<double>>& v) { return cross_entropy(v[0], pixel_targets6, smoothing, 4.0); },
        [&](const auto& v) { return cross_entropy(v[0], pixel_targets6, smoothing, 4.0); }, pixels);
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradient_is_scaled_by_the_incoming_one) {
  // backward seeded with 3 (not 1): the kernel that multiplies by the device-side gradient.
  const Tensor<double> logits = random_tensor({5, 5}, 7, -2, 2);
  Var<double> cpu(logits.clone(), true);
  Emulated emulated(logits.to<HostEmulated>(), true);
  backward(cross_entropy(cpu, targets5), Tensor<double>::full(Shape{}, 3.0));
  backward(cross_entropy(emulated, targets5), Tensor<double, HostEmulated>::full(Shape{}, 3.0));
  BOOST_TEST(relative_difference(emulated.grad().to<Cpu>(), cpu.grad()) <= 1e-12);
}

BOOST_AUTO_TEST_CASE(cross_entropy_checks_targets_on_the_host) {
  const Emulated logits(Tensor<double>::zeros({2, 3}).to<HostEmulated>(), true);
  const std::vector<std::int64_t> bad{0, 3};
  const std::string message = test::error_message([&] { (void)cross_entropy(logits, bad); });
  BOOST_TEST(message.find("target 3 at index 1 is out of range for 3 classes") != std::string::npos, message);
  const std::vector<std::int64_t> short_targets{0};
  BOOST_TEST(test::error_message([&] { (void)cross_entropy(logits, short_targets); }).find("1 targets") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(nll_loss_matches_the_cpu_and_finite_differences, D, test::Devices) {
  const std::vector<std::int64_t> rows{2, 0, 4, 1, 3}, pixels{1, 0, 2, 2, 1, 0};
  test::check_op<D>([&](const auto& v) { return nll_loss(v[0], rows); }, {random_tensor({5, 5}, 45)});
  test::check_op<D>([&](const auto& v) { return nll_loss(v[0], pixels); }, {random_tensor({2, 3, 3}, 46)});  // [N, C, d]
  const Tensor<double> x = random_tensor({2, 3}, 47);
  const std::vector<std::int64_t> bad{0, 3};
  test::expect_same_error<D>([&] { (void)nll_loss(Var<double>(x), bad); }, [&] { (void)nll_loss(emulated(x), bad); });
}

BOOST_AUTO_TEST_CASE_TEMPLATE(mse_loss_matches_the_cpu_and_finite_differences, D, test::Devices) {
  test::check_op<D>([](const auto& v) { return mse_loss(v[0], v[1]); }, {random_tensor({3, 5}, 40), random_tensor({3, 5}, 41)});
  const Tensor<double> a = random_tensor({2, 3}, 42), b = random_tensor({3, 2}, 43);
  test::expect_same_error<D>([&] { (void)mse_loss(Var<double>(a), Var<double>(b)); },
                    [&] { (void)mse_loss(emulated(a), emulated(b)); });
}

BOOST_AUTO_TEST_CASE_TEMPLATE(binary_cross_entropy_with_logits_matches_the_cpu_and_finite_differences, D, test::Devices) {
  const auto bce = [](const auto& v) { return binary_cross_entropy_with_logits(v[0], v[1]); };
  test::check_op<D>(bce, {random_tensor({4, 3}, 50, -6, 6), random_tensor({4, 3}, 51, 0, 1)});
  // pos_weight per class of [N, C] logits, and per channel ([C, 1, 1]) of [N, C, H, W] ones.
  for (const auto& [shape, weight_shape] : {std::pair{Shape{4, 3}, Shape{3}}, std::pair{Shape{2, 3, 2, 2}, Shape{3, 1, 1}}}) {
    BOOST_TEST_CONTEXT("logits " << shape << ", pos_weight " << weight_shape) {
      const Tensor<double> pos_weight = random_tensor(weight_shape, 52, 0.5, 3);
      test::check_op<D>(
          [&](const auto& v) {
            return binary_cross_entropy_with_logits(v[0], v[1], constant_like<std::decay_t<decltype(v[0])>>(pos_weight));
          },
          {random_tensor(shape, 53, -3, 3), random_tensor(shape, 54, 0, 1)});
    }
  }
  const Tensor<double> x = random_tensor({2, 3}, 55), bad_weight = random_tensor({2}, 56);
  test::expect_same_error<D>([&] { (void)binary_cross_entropy_with_logits(Var<double>(x), Var<double>(x), bad_weight); },
                    [&] {
                      (void)binary_cross_entropy_with_logits(emulated(x), emulated(x),
                                                             bad_weight.to<HostEmulated>());
                    });
}

BOOST_AUTO_TEST_SUITE_END()
