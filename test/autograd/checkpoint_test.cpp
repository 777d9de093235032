// run_checkpointed(): one node kept where the forward's graph would be, the same gradients as the plain
// run (dropout's draws replayed), finite differences through it, and parameter hooks fired once.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <ptrain/autograd/checkpoint.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/dropout.hpp>
#include <ptrain/autograd/ops/linear.hpp>

#include "../common/recorded_graph.hpp"

using namespace ptrain;
using test::max_abs_difference;
using test::recorded_ops;

BOOST_AUTO_TEST_SUITE(checkpoint_test)

namespace {

// tanh(linear(dropout(x))) twice over: a small network with dropout from global_rng().
struct TwoLayers {
  Var<double> w1{random_tensor({5, 4}, 1), true}, b1{random_tensor({5}, 2), true};
  Var<double> w2{random_tensor({3, 5}, 3), true}, b2{random_tensor({3}, 4), true};
  double p = 0.0;
  int runs = 0;
  Var<double> operator()(const Var<double>& x) {
    ++runs;
    const Var<double> h = tanh(linear(dropout(x, p, true), w1, b1));
    return tanh(linear(dropout(h, p, true), w2, b2));
  }
  std::vector<Var<double>> parameters() const { return {w1, b1, w2, b2}; }
  CheckpointedForward<double, Cpu> checkpointed() {
    return {.forward = [this](const Var<double>& x) { return (*this)(x); }, .parameters = parameters()};
  }
};
}  // namespace

BOOST_AUTO_TEST_CASE(keeps_one_node_and_runs_the_forward_again_in_backward) {
  TwoLayers net;
  Var<double> x(random_tensor({2, 4}, 5), true);
  const Var<double> plain = net(x);
  const Var<double> y = run_checkpointed(net.checkpointed(), x);
  BOOST_TEST(recorded_ops(plain) >= 4u);
  BOOST_TEST(recorded_ops(y) == 1u);
  BOOST_TEST(std::string(y.node()->op) == "checkpoint");
  BOOST_TEST(max_abs_difference(y.value(), plain.value()) == 0.0);
  BOOST_TEST(net.runs == 2);
  backward(y, Tensor<double>::ones(y.shape()));
  BOOST_TEST(net.runs == 3);
}

BOOST_AUTO_TEST_CASE(gradients_equal_the_plain_runs_with_dropout_replayed) {
  TwoLayers net;
  net.p = 0.4;
  const Tensor<double> x0 = random_tensor({6, 4}, 6), seed = random_tensor({6, 3}, 7);
  std::vector<Tensor<double>> grads[2];
  Tensor<double> x_grad[2];
  for (int checkpointed = 0; checkpointed < 2; ++checkpointed) {
    for (auto& p : net.parameters()) Var<double>(p).zero_grad();
    manual_seed(11);
    Var<double> x(x0.clone(), true);
    const Var<double> y = checkpointed ? run_checkpointed(net.checkpointed(), x) : net(x);
    const auto after_forward = global_rng().engine();
    backward(y, seed.clone());
    // the recompute drew from global_rng() at its first run's state and gave the state back
    BOOST_TEST((global_rng().engine() == after_forward));
    for (const auto& p : net.parameters()) grads[checkpointed].push_back(p.grad().clone());
    x_grad[checkpointed] = x.grad().clone();
  }
  for (std::size_t i = 0; i < grads[0].size(); ++i)
    BOOST_TEST(max_abs_difference(grads[0][i], grads[1][i]) <= 1e-12);
  BOOST_TEST(max_abs_difference(x_grad[0], x_grad[1]) <= 1e-12);
  // and dropout acted: another seed gives other gradients
  for (auto& p : net.parameters()) Var<double>(p).zero_grad();
  manual_seed(12);
  backward(run_checkpointed(net.checkpointed(), Var<double>(x0.clone(), true)), seed.clone());
  BOOST_TEST(max_abs_difference(net.w1.grad(), grads[0][0]) > 1e-6);
}

BOOST_AUTO_TEST_CASE(matches_finite_differences) {
  const auto f = [](const std::vector<Var<double>>& v) {
    return run_checkpointed<double, Cpu>(
        {.forward = [&](const Var<double>& x) { return tanh(linear(tanh(linear(x, v[1], v[2])), v[3])); },
         .parameters = {v[1], v[2], v[3]}},
        v[0]);
  };
  const auto r = gradcheck(f, {random_tensor({3, 4}, 8), random_tensor({5, 4}, 9), random_tensor({5}, 10),
                               random_tensor({2, 5}, 11)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(parameters_get_gradients_when_the_input_needs_none) {
  TwoLayers net;
  const Var<double> x(random_tensor({2, 4}, 12), false);
  const Var<double> y = run_checkpointed(net.checkpointed(), x);
  BOOST_REQUIRE(y.requires_grad());
  backward(y, Tensor<double>::ones(y.shape()));
  for (const auto& p : net.parameters()) BOOST_TEST(p.grad().defined());
  BOOST_TEST(!x.grad().defined());
}

// A parameter read inside and outside the checkpointed part (a tied weight): its on_grad_ready hook
// (where data-parallel reduction starts) fires once, when both shares are in.
BOOST_AUTO_TEST_CASE(a_parameters_hook_fires_once_with_its_whole_gradient) {
  Var<double> w(random_tensor({4, 4}, 13), true);
  const Tensor<double> x = random_tensor({2, 4}, 14);
  const auto inner = [&](const Var<double>& in) { return tanh(linear(in, w)); };
  const auto run = [&](bool checkpointed) {
    w.zero_grad();
    const Var<double> in(x);
    const Var<double> h = checkpointed ? run_checkpointed<double, Cpu>({.forward = inner, .parameters = {w}}, in)
                                       : inner(in);
    backward(linear(h, w), Tensor<double>::ones({2, 4}));
  };
  run(false);
  const Tensor<double> whole = w.grad().clone();
  int fired = 0;
  Tensor<double> seen;
  w.on_grad_ready([&](Node<double>& node) {
    ++fired;
    seen = node.grad.clone();
  });
  run(true);
  BOOST_TEST(fired == 1);
  BOOST_TEST(max_abs_difference(seen, whole) <= 1e-12);
}

BOOST_AUTO_TEST_CASE(is_a_plain_forward_when_not_recording) {
  TwoLayers net;
  const Var<double> x(random_tensor({2, 4}, 14), true);
  NoGradGuard no_grad;
  const Var<double> y = run_checkpointed(net.checkpointed(), x);
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(net.runs == 1);
}

BOOST_AUTO_TEST_SUITE_END()
