#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/backward_hook.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/autograd/ops/shape.hpp>

#include "../common/device_residual.hpp"
#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::CpuVars;
using test::Emulated;
using test::EmulatedVars;
using test::emulated;
using test::relative_difference;

BOOST_AUTO_TEST_SUITE(backward_test)

BOOST_AUTO_TEST_CASE(intermediate_held_by_nobody_survives_until_its_backward) {
  // relu(linear(...)): only the relu node refers to the linear node, and relu drops its inputs
  // before linear's backward runs.
  Var<double> x(Tensor<double>::from({1, 2}, {1, 2}), true);
  Var<double> w(Tensor<double>::from({3, 2}, {1, 0, 3, 4, -1, -1}), true);
  Var<double> b(Tensor<double>::from({3}, {0.5, -1, 0}), true);
  Var<double> y = relu(linear(x, w, b));
  std::weak_ptr<Node<double>> hidden = y.node()->inputs.at(0);
  backward(y, Tensor<double>::ones(y.shape()));
  // pre-activation [1.5, 10, -3]: the third unit passes no gradient.
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{4, 4}), boost::test_tools::per_element());
  BOOST_TEST(w.grad().to_vector() == (std::vector<double>{1, 2, 1, 2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(b.grad().to_vector() == (std::vector<double>{1, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(hidden.expired(), "the intermediate node is released once backward is done with it");
}

BOOST_AUTO_TEST_CASE(retain_graph_keeps_the_graph_for_a_second_pass) {
  Var<double> x(Tensor<double>::from({1, 2}, {1, 2}), true);
  Var<double> w(Tensor<double>::from({1, 2}, {3, -1}), true);
  Var<double> y = relu(linear(x, w));
  backward(y, Tensor<double>::ones(y.shape()), true);
  backward(y, Tensor<double>::ones(y.shape()));
  BOOST_TEST(w.grad().to_vector() == (std::vector<double>{2, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_weight_used_twice_accumulates_through_the_executor, D, test::Devices) {
  // y = linear(relu(linear(x, w)), w): w receives two gradients, added by Node::accumulate's map2.
  const std::vector<Tensor<double>> inputs{random_tensor({5, 4}, 8), random_tensor({4, 4}, 9)};
  const auto twice_cpu = [](const std::vector<Var<double>>& v) { return linear(relu(linear(v[0], v[1])), v[1]); };
  const auto twice = [](const auto& v) { return linear(relu(linear(v[0], v[1])), v[1]); };
  test::expect_gradcheck_on<D>(twice, inputs);
  test::check_matches_cpu_on<D>(twice_cpu, twice, inputs);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_backward_hook_passes_the_gradient_on_unchanged, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({5, 4}, 8), random_tensor({4, 4}, 9)};
  int hooks = 0;
  test::expect_gradcheck_on<D>(
      [&](const auto& v) { return relu(linear(with_backward_hook(linear(v[0], v[1]), [&] { ++hooks; }), v[1])); },
      inputs);
  BOOST_TEST(hooks > 0);
}

// The hook runs once, after the ops that consume x passed their gradients back and before the op
// that made x.
BOOST_AUTO_TEST_CASE(a_backward_hook_runs_between_the_consumers_and_the_producer) {
  Var<double> x(Tensor<double>::from({1, 2}, {1, 2}), true);
  Var<double> w(Tensor<double>::from({2, 2}, {1, 0, 0, 1}), true);
  std::vector<const char*> seen;
  w.on_grad_ready([&](Node<double>&) { seen.push_back("w ready"); });
  Var<double> made = linear(x, w);
  Var<double> hooked = with_backward_hook(made, [&] {
    seen.push_back(made.grad().defined() ? "hook after the producer" : "hook");
  });
  backward(sum(add(hooked, hooked)));
  BOOST_TEST(seen.size() == 2u);
  BOOST_TEST(std::string(seen.at(0)) == "hook");
  BOOST_TEST(std::string(seen.at(1)) == "w ready");
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{2, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(no_grad_records_no_node) {
  const Emulated x(random_tensor({2, 3}, 10).to<HostEmulated>(), true);
  NoGradGuard no_grad;
  const Emulated y = relu(x);
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(y.is_leaf());
}

BOOST_AUTO_TEST_CASE(a_residual_network_matches_the_cpu) {
  const std::vector<std::int64_t> targets{1, 0, 2};
  auto cpu_running = test::fresh_running_statistics<double, Cpu>(4);
  auto running = test::fresh_running_statistics<double, HostEmulated>(4);
  test::check_matches_cpu([&](const CpuVars& v) { return test::residual_net(v, cpu_running, targets); },
                    [&](const EmulatedVars& v) { return test::residual_net(v, running, targets); },
                    test::residual_net_inputs({3, 2, 8, 8}, 4, 3, 110));
  for (std::size_t i = 0; i < running.size(); ++i)
    BOOST_TEST(relative_difference(running[i].to<Cpu>(), cpu_running[i]) <= 1e-12, "running statistic " << i);
}

BOOST_AUTO_TEST_CASE(a_residual_step_in_float_matches_the_cpu) {
  // The steps the CUDA check runs on Var<float, Cuda>, here on HostEmulated: the unfused network,
  // then the one with batch norm fused with relu and the residual add, both against the unfused CPU.
  std::vector<Tensor<float>> inputs;
  for (const auto& t : test::residual_net_inputs({4, 3, 9, 7}, 5, 4, 120)) inputs.push_back(tensor_cast<float>(t));
  const std::vector<std::int64_t> targets{3, 0, 1, 2};
  const auto cpu = test::residual_step<float, Cpu>(inputs, targets);
  for (bool fused : {false, true}) {
    BOOST_TEST_CONTEXT("fused " << fused) {
      const auto emulated = test::residual_step<float, HostEmulated>(inputs, targets, fused);
      BOOST_TEST(relative_difference(emulated.loss, cpu.loss) <= 1e-5);
      BOOST_REQUIRE_EQUAL(emulated.grads.size(), 9u);
      for (std::size_t i = 0; i < cpu.grads.size(); ++i)
        BOOST_TEST(relative_difference(emulated.grads[i], cpu.grads[i]) <= 1e-5, "gradient of input " << i);
      for (std::size_t i = 0; i < cpu.running.size(); ++i)
        BOOST_TEST(relative_difference(emulated.running[i], cpu.running[i]) <= 1e-5, "running statistic " << i);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
