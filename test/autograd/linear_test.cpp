#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/optim/sgd.hpp>

#include "../common/device_mlp.hpp"
#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::emulated;
using test::relative_difference;

BOOST_AUTO_TEST_SUITE(linear_test)

BOOST_AUTO_TEST_CASE(matmul_gradient) {
  auto r = gradcheck([](const auto& v) { return matmul(v[0], v[1]); },
                     {random_tensor({3, 4}, 1), random_tensor({4, 5}, 2)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(linear_gradient_with_and_without_bias) {
  auto with_bias = gradcheck([](const auto& v) { return linear(v[0], v[1], v[2]); },
                             {random_tensor({3, 4}, 1), random_tensor({2, 4}, 2), random_tensor({2}, 3)});
  BOOST_TEST(with_bias.ok, with_bias.report);
  auto without = gradcheck([](const auto& v) { return linear(v[0], v[1]); },
                           {random_tensor({3, 4}, 1), random_tensor({2, 4}, 2)});
  BOOST_TEST(without.ok, without.report);
}

BOOST_AUTO_TEST_CASE(linear_forward_matches_hand_computation) {
  Var<double> x(Tensor<double>::from({1, 2}, {1, 2}));
  Var<double> w(Tensor<double>::from({2, 2}, {1, 0, 3, 4}));
  Var<double> b(Tensor<double>::from({2}, {0.5, -1}));
  auto y = linear(x, w, b).value().to_vector();
  BOOST_TEST(y[0] == 1.5);
  BOOST_TEST(y[1] == 10.0);
}

BOOST_AUTO_TEST_CASE(relu_gradient_away_from_kink) {
  auto r = gradcheck([](const auto& v) { return relu(v[0]); }, {random_tensor({4, 5}, 9)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(gradient_reaches_shared_input_from_both_paths) {
  // y = relu(x W) used twice: the leaf hook fires once, after both contributions.
  Var<double> x(random_tensor({2, 3}, 4), true);
  Var<double> w(random_tensor({3, 3}, 5), true);
  int ready = 0;
  w.on_grad_ready([&](Node<double>&) { ++ready; });
  auto h = matmul(x, w);
  auto y = matmul(h, w);
  backward(y, Tensor<double>::ones(y.shape()));
  BOOST_TEST(ready == 1);
  BOOST_TEST(w.grad().defined());
}

BOOST_AUTO_TEST_CASE(intermediates_owned_only_by_the_graph_survive_backward) {
  // Every intermediate here is a temporary: only its consumer's node holds it, and the engine
  // releases consumers as it goes.
  Var<double> x(random_tensor({4, 3}, 6), true);
  Var<double> w(random_tensor({3, 3}, 7), true);
  backward(matmul(relu(matmul(relu(matmul(x, w)), w)), w), Tensor<double>::ones({4, 3}));
  BOOST_TEST(x.grad().defined());
  BOOST_TEST(w.grad().defined());
}

BOOST_AUTO_TEST_CASE(gradcheck_detects_a_wrong_backward) {
  auto wrong = [](const std::vector<Var<double>>& v) {
    Tensor<double> y = v[0].value().clone();
    return make_var<double>(y, {v[0]}, "wrong", [](Node<double>& self) {
      Tensor<double> g = self.grad.clone();
      g.array() *= 2.0;
      self.inputs[0]->accumulate(std::move(g));
    });
  };
  BOOST_TEST(!gradcheck(wrong, {random_tensor({3}, 1)}).ok);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(linear_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({5, 7}, 1), random_tensor({3, 7}, 2), random_tensor({3}, 3)};
  test::expect_gradcheck_on<D>([](const auto& v) { return linear(v[0], v[1], v[2]); }, inputs);
  test::expect_gradcheck_on<D>([](const auto& v) { return linear(v[0], v[1]); }, {inputs[0], inputs[1]});
  test::check_matches_cpu_on<D>([](const std::vector<Var<double>>& v) { return linear(v[0], v[1], v[2]); },
                    [](const auto& v) { return linear(v[0], v[1], v[2]); }, inputs);
}

// a [2, 3, m, k] (or its transpose) times b: each matrix against matmul of the host transposes.
BOOST_AUTO_TEST_CASE(bmm_multiplies_each_matrix_with_the_asked_transposes) {
  const std::int64_t m = 3, k = 4, n = 2;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor<double> a = random_tensor(ta ? Shape{2, 3, k, m} : Shape{2, 3, m, k}, 11);
      const Tensor<double> b = random_tensor(tb ? Shape{2, 3, n, k} : Shape{2, 3, k, n}, 12);
      const Tensor<double> y = bmm(Var<double>(a), Var<double>(b), ta, tb).value();
      BOOST_REQUIRE(y.shape() == (Shape{2, 3, m, n}));
      for (std::int64_t batch = 0; batch < 6; ++batch)
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (std::int64_t p = 0; p < k; ++p)
              want += a[batch * m * k + (ta ? p * m + i : i * k + p)] * b[batch * k * n + (tb ? j * k + p : p * n + j)];
            BOOST_TEST(std::abs(y[batch * m * n + i * n + j] - want) <= 1e-12);
          }
    }
  BOOST_TEST(test::error_message([] {
               (void)bmm(Var<double>(random_tensor({2, 3, 4}, 1)), Var<double>(random_tensor({2, 5, 2}, 2)));
             }).find("bmm: [2, 3, 4] and [2, 5, 2] do not multiply (4 against 5)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(bmm_matches_finite_differences_and_the_cpu, D, test::Devices) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      test::check_op<D>([ta, tb](const auto& v) { return bmm(v[0], v[1], ta, tb); },
                        {random_tensor(ta ? Shape{3, 4, 2} : Shape{3, 2, 4}, 13),
                         random_tensor(tb ? Shape{3, 5, 4} : Shape{3, 4, 5}, 14)});
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

BOOST_AUTO_TEST_CASE_TEMPLATE(matmul_matches_finite_differences_and_the_cpu, D, test::Devices) {
  test::check_op<D>([](const auto& v) { return matmul(v[0], v[1]); }, {random_tensor({3, 4}, 1), random_tensor({4, 5}, 2)});
  test::check_op<D>([](const auto& v) { return matmul(v[0], v[0]); }, {random_tensor({3, 3}, 3)});
}

BOOST_AUTO_TEST_SUITE_END()
