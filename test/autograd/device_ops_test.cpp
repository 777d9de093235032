// The device-generic autograd ops on HostEmulated (the GPU algorithms run by HostExecutor):
// finite differences, the CPU ops' values and gradients, and a small MLP trained by Sgd<T, HostEmulated>.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/device_ops/activation.hpp>
#include <ptrain/autograd/device_ops/linear.hpp>
#include <ptrain/autograd/device_ops/loss.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/optim/sgd.hpp>

#include "../common/compare.hpp"
#include "../common/device_compare.hpp"
#include "../common/device_mlp.hpp"

using namespace ptrain;

namespace {

using Emulated = Var<double, HostEmulated>;

const std::vector<std::int64_t> targets5{2, 0, 4, 1, 3};          // 5 rows, classes < 5
const std::vector<std::int64_t> pixel_targets{1, 0, 2, 2, 1, 0};  // [2, 3, 3] scores

using test::relative_difference;
using test::check_matches_cpu;
using test::expect_gradcheck;

}  // namespace

BOOST_AUTO_TEST_SUITE(device_ops_test)

BOOST_AUTO_TEST_CASE(linear_matches_finite_differences_and_the_cpu) {
  const std::vector<Tensor<double>> inputs{random_tensor({5, 7}, 1), random_tensor({3, 7}, 2), random_tensor({3}, 3)};
  expect_gradcheck([](const std::vector<Emulated>& v) { return linear(v[0], v[1], v[2]); }, inputs);
  expect_gradcheck([](const std::vector<Emulated>& v) { return linear(v[0], v[1]); }, {inputs[0], inputs[1]});
  check_matches_cpu([](const std::vector<Var<double>>& v) { return linear(v[0], v[1], v[2]); },
                    [](const std::vector<Emulated>& v) { return linear(v[0], v[1], v[2]); }, inputs);
}

BOOST_AUTO_TEST_CASE(relu_matches_finite_differences_and_the_cpu) {
  const std::vector<Tensor<double>> inputs{random_tensor({4, 9}, 4)};
  expect_gradcheck([](const std::vector<Emulated>& v) { return relu(v[0]); }, inputs);
  check_matches_cpu([](const std::vector<Var<double>>& v) { return relu(v[0]); },
                    [](const std::vector<Emulated>& v) { return relu(v[0]); }, inputs);
}

BOOST_AUTO_TEST_CASE(cross_entropy_matches_finite_differences_and_the_cpu) {
  const std::vector<Tensor<double>> rows{random_tensor({5, 5}, 5, -2, 2)};
  const std::vector<Tensor<double>> pixels{random_tensor({2, 3, 3}, 6, -2, 2)};
  for (double smoothing : {0.0, 0.1}) {
    expect_gradcheck([&](const std::vector<Emulated>& v) { return cross_entropy(v[0], targets5, smoothing); }, rows);
    check_matches_cpu([&](const std::vector<Var<double>>& v) { return cross_entropy(v[0], targets5, smoothing); },
                      [&](const std::vector<Emulated>& v) { return cross_entropy(v[0], targets5, smoothing); },
                      rows);
    check_matches_cpu(
        [&](const std::vector<Var<double>>& v) { return cross_entropy(v[0], pixel_targets, smoothing, 4.0); },
        [&](const std::vector<Emulated>& v) { return cross_entropy(v[0], pixel_targets, smoothing, 4.0); }, pixels);
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

BOOST_AUTO_TEST_CASE(a_weight_used_twice_accumulates_through_the_executor) {
  // y = linear(relu(linear(x, w)), w): w receives two gradients, added by Node::accumulate's map2.
  const std::vector<Tensor<double>> inputs{random_tensor({5, 4}, 8), random_tensor({4, 4}, 9)};
  const auto twice_cpu = [](const std::vector<Var<double>>& v) { return linear(relu(linear(v[0], v[1])), v[1]); };
  const auto twice = [](const std::vector<Emulated>& v) { return linear(relu(linear(v[0], v[1])), v[1]); };
  expect_gradcheck(twice, inputs);
  check_matches_cpu(twice_cpu, twice, inputs);
}

BOOST_AUTO_TEST_CASE(no_grad_records_no_node) {
  const Emulated x(random_tensor({2, 3}, 10).to<HostEmulated>(), true);
  NoGradGuard no_grad;
  const Emulated y = relu(x);
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(y.is_leaf());
}

template <class T>
void check_mlp_matches_cpu(double tol) {
  const auto weights = test::mlp_weights<T>(6, 8, 5, 21);
  Tensor<T> x({10, 6});
  Rng rng(22);
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<T>(rng.uniform(-1, 1));
  const std::vector<std::int64_t> targets{0, 1, 2, 3, 4, 4, 3, 2, 1, 0};
  const auto cpu = test::train_mlp<T, Cpu>(weights, x, targets, 5);
  const auto emulated = test::train_mlp<T, HostEmulated>(weights, x, targets, 5);
  BOOST_REQUIRE_EQUAL(emulated.losses.size(), 5u);
  for (std::size_t s = 0; s < cpu.losses.size(); ++s)
    BOOST_TEST(std::abs(emulated.losses[s] - cpu.losses[s]) <= tol * std::abs(cpu.losses[s]), "loss at step " << s);
  BOOST_TEST(cpu.losses.back() < cpu.losses.front());  // it trained
  for (std::size_t i = 0; i < cpu.params.size(); ++i) {
    BOOST_TEST(relative_difference(emulated.params[i], cpu.params[i]) <= tol, "parameter " << i);
    BOOST_TEST(relative_difference(cpu.params[i], weights[i]) > 1e-3, "parameter " << i << " moved");
  }
}

BOOST_AUTO_TEST_CASE(mlp_trained_by_device_sgd_matches_the_cpu_in_double) { check_mlp_matches_cpu<double>(1e-12); }
BOOST_AUTO_TEST_CASE(mlp_trained_by_device_sgd_matches_the_cpu_in_float) { check_mlp_matches_cpu<float>(1e-5); }

BOOST_AUTO_TEST_SUITE_END()
