#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include <ptrain/optim/sgd.hpp>

#include "optim_test_util.hpp"

using namespace ptrain;
using namespace optim_test;

namespace {

// Expected values: torch.optim.SGD (PyTorch 1.13, float64) on the same run, printed by
// test/optim/make_references.py.
void check_sgd(SgdOptions options, const Rows& p, const Rows& q) {
  auto t = run_quadratic([&](std::vector<Var<double>> ps) { return Sgd<double>(ps, options); });
  check_rows(t.p, p, 1e-13);
  check_rows(t.q, q, 1e-13);
}

std::vector<Var<double>> one_param() { return {Var<double>(Tensor<double>::zeros({2}), true)}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(sgd_test)

static_assert(Optimizer<Sgd<float>> && MomentumOptimizer<Sgd<double>>);

BOOST_AUTO_TEST_CASE(plain_matches_pytorch) {
  check_sgd({.lr = 0.1},
            {{0.91, -1.93, 0.42}, {0.8290000000000001, -1.8635, 0.356}, {0.7561000000000001, -1.800325, 0.30479999999999996},
             {0.69049, -1.7403087499999998, 0.26383999999999996}},
            {{0.07499999999999998, -0.625}, {0.07499999999999998, -0.625}, {-0.04750000000000001, -0.5375},
             {-0.04750000000000001, -0.5375}});
}

BOOST_AUTO_TEST_CASE(momentum_matches_pytorch) {
  // The first step's buffer is the gradient itself (not (1 - dampening) times it).
  check_sgd({.lr = 0.1, .momentum = 0.9},
            {{0.91, -1.93, 0.42}, {0.748, -1.8005, 0.284}, {0.5374, -1.623925, 0.12479999999999998},
             {0.3041199999999999, -1.41381125, -0.02344}},
            {{0.07499999999999998, -0.625}, {0.07499999999999998, -0.625}, {-0.20500000000000002, -0.425},
             {-0.20500000000000002, -0.425}});
}

BOOST_AUTO_TEST_CASE(dampening_matches_pytorch) {
  check_sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.5},
            {{0.91, -1.93, 0.42}, {0.7885, -1.83375, 0.31599999999999995}, {0.644725, -1.71628125, 0.20079999999999995},
             {0.48809125, -1.58265234375, 0.08703999999999995}},
            {{0.07499999999999998, -0.625}, {0.07499999999999998, -0.625}, {-0.14375000000000002, -0.46875},
             {-0.14375000000000002, -0.46875}});
}

BOOST_AUTO_TEST_CASE(nesterov_matches_pytorch) {
  check_sgd({.lr = 0.1, .momentum = 0.9, .nesterov = true},
            {{0.829, -1.867, 0.348}, {0.61759, -1.689935, 0.18895999999999996},
             {0.39458889999999996, -1.484047675, 0.05665919999999998},
             {0.184499119, -1.263811628375, -0.029929216000000005}},
            {{-0.08250000000000003, -0.5125}, {-0.08250000000000003, -0.5125}, {-0.367225, -0.3091249999999999},
             {-0.367225, -0.3091249999999999}});
}

BOOST_AUTO_TEST_CASE(weight_decay_matches_pytorch) {
  check_sgd({.lr = 0.1, .momentum = 0.8, .weight_decay = 0.05},
            {{0.905, -1.92, 0.4175}, {0.743975, -1.7804, 0.28591249999999996},
             {0.547037625, -1.600798, 0.14203043749999997},
             {0.3420487743749999, -1.3990725099999999, 0.017808547812499975}},
            {{0.07375, -0.62125}, {0.07375, -0.62125}, {-0.18974375000000004, -0.42876875},
             {-0.18974375000000004, -0.42876875}});
  check_sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true},
            {{0.905, -1.9145, 0.41925}, {0.7794275, -1.7974235, 0.320184625},
             {0.63475957625, -1.6562930105, 0.2167680798125},
             {0.48180773040687497, -1.4983973028514999, 0.12070540428365623}},
            {{0.08137499999999999, -0.624125}, {0.08137499999999999, -0.624125},
             {-0.10947743750000001, -0.48165768750000004}, {-0.10947743750000001, -0.48165768750000004}});
}

BOOST_AUTO_TEST_CASE(float_matches_pytorch_float32) {
  Var<float> p(Tensor<float>::from({3}, {1.0f, -2.0f, 0.5f}), true);
  Sgd<float> opt({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  const float a[3] = {1.0f, 0.5f, 2.0f}, b[3] = {0.1f, -0.3f, 0.2f};
  for (int k = 0; k < 4; ++k) {
    p.grad() = Tensor<float>({3});
    for (int i = 0; i < 3; ++i) p.grad()[i] = a[i] * p.value()[i] - b[i];
    opt.step();
  }
  const float want[3] = {0.17793482542037964f, -1.244992733001709f, -0.031520795077085495f};
  for (int i = 0; i < 3; ++i) BOOST_TEST(p.value()[i] == want[i], boost::test_tools::tolerance(2e-6f));
}

BOOST_AUTO_TEST_CASE(large_parameter_matches_elementwise_formula) {
  // Big enough for the chunked, threaded path, and not a multiple of the chunk.
  const std::int64_t n = 3 * detail::update_chunk * 4 + 17;
  Tensor<double> init({n}), grad({n});
  for (std::int64_t i = 0; i < n; ++i) {
    init[i] = std::sin(0.001 * static_cast<double>(i));
    grad[i] = std::cos(0.003 * static_cast<double>(i));
  }
  Var<double> p(init.clone(), true);
  const double lr = 0.05, mu = 0.9, wd = 0.01;
  Sgd<double> opt({p}, {.lr = lr, .momentum = mu, .weight_decay = wd, .nesterov = true});
  std::vector<double> ref = init.to_vector(), buf(static_cast<std::size_t>(n));
  for (int k = 0; k < 3; ++k) {
    p.grad() = grad;
    opt.step();
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double d = grad[static_cast<std::int64_t>(i)] + wd * ref[i];
      buf[i] = k == 0 ? d : mu * buf[i] + d;
      ref[i] -= lr * (d + mu * buf[i]);
    }
  }
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(p.value()[i] - ref[static_cast<std::size_t>(i)]));
  BOOST_TEST(worst < 1e-14);
  BOOST_TEST(grad[5] == std::cos(0.015));  // the gradient is read, never written
}

BOOST_AUTO_TEST_CASE(parameters_without_gradient_are_untouched) {
  Var<double> used(Tensor<double>::from({2}, {1, 2}), true);
  Var<double> no_grad(Tensor<double>::from({2}, {3, 4}), true);
  Var<double> frozen(Tensor<double>::from({2}, {5, 6}), false);
  frozen.grad() = Tensor<double>::ones({2});  // requires_grad off: skipped even with a gradient
  Sgd<double> opt({used, no_grad, frozen}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.1});
  used.grad() = Tensor<double>::ones({2});
  opt.step();
  BOOST_TEST(used.value()[0] == 1 - 0.5 * (1 + 0.1 * 1));
  BOOST_TEST(no_grad.value().to_vector() == std::vector<double>({3, 4}));
  BOOST_TEST(frozen.value().to_vector() == std::vector<double>({5, 6}));
  const auto state = opt.state();
  BOOST_REQUIRE_EQUAL(state.tensors.size(), 1u);  // only the updated parameter has a buffer
  BOOST_TEST(state.tensors[0].first == "0.momentum_buffer");
}

BOOST_AUTO_TEST_CASE(zero_grad_drops_or_zeroes) {
  Var<double> p(Tensor<double>::ones({2}), true);
  Sgd<double> opt({p}, {.lr = 0.1});
  p.grad() = Tensor<double>::ones({2});
  opt.zero_grad(false);
  BOOST_TEST(p.grad().to_vector() == std::vector<double>({0, 0}));
  opt.zero_grad();
  BOOST_TEST(!p.grad().defined());
}

BOOST_AUTO_TEST_CASE(state_round_trip_resumes_exactly) {
  const SgdOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true};
  auto straight = run_quadratic([&](auto ps) { return Sgd<double>(ps, options); });
  auto p = initial_p();
  auto q = initial_q();
  OptimizerState<double> saved;
  {
    Sgd<double> first({p, q}, options);
    for (int k = 0; k < 2; ++k) {
      quadratic_grads(p, q, k);
      first.step();
    }
    first.set_lr(0.2);
    saved = first.state();
    for (auto& [name, t] : saved.tensors) t = t.clone();  // what a checkpoint file would hold
  }
  Sgd<double> second({p, q}, options);
  second.load_state(saved);
  BOOST_TEST(second.lr() == 0.2);
  second.set_lr(0.1);
  for (int k = 2; k < 4; ++k) {
    quadratic_grads(p, q, k);
    second.step();
  }
  check_rows({p.value().to_vector()}, {straight.p[3]}, 1e-15);
  check_rows({q.value().to_vector()}, {straight.q[3]}, 1e-15);
}

BOOST_AUTO_TEST_CASE(load_state_rejects_bad_entries) {
  Var<double> p(Tensor<double>::zeros({3}), true);
  Sgd<double> opt({p}, {.lr = 0.1, .momentum = 0.9});
  check_throws_with([&] { opt.load_state({{}, {{"0.momentum_buffer", Tensor<double>::zeros({4})}}}); },
                    "'0.momentum_buffer' has shape [4], expected [3]");
  check_throws_with([&] { opt.load_state({{}, {{"1.momentum_buffer", Tensor<double>::zeros({3})}}}); },
                    "index below 1");
  check_throws_with([&] { opt.load_state({{}, {{"0.exp_avg", Tensor<double>::zeros({3})}}}); },
                    "unknown name 'exp_avg'");
  check_throws_with([&] { opt.load_state({{{"betas", 0.9}}, {}}); }, "state scalar 'betas' is unknown");
  BOOST_TEST(opt.state().tensors.empty());
}

BOOST_AUTO_TEST_CASE(invalid_options_are_refused) {
  check_throws_with([] { Sgd<double>(one_param(), {.lr = -0.1}); }, "invalid learning rate -0.1");
  check_throws_with([] { Sgd<double>(one_param(), {}); }, "lr was not set");
  check_throws_with([] { Sgd<double>(one_param(), {.lr = 0.1, .momentum = -1}); }, "invalid momentum -1");
  check_throws_with([] { Sgd<double>(one_param(), {.lr = 0.1, .weight_decay = -1}); }, "invalid weight_decay -1");
  check_throws_with([] { Sgd<double>(one_param(), {.lr = 0.1, .nesterov = true}); },
                    "Nesterov momentum requires a momentum > 0 and zero dampening");
  check_throws_with([] { Sgd<double>(one_param(), {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
                    "zero dampening");
  check_throws_with([] { Sgd<double>({}, {.lr = 0.1}); }, "empty parameter list");
  auto p = one_param();
  check_throws_with([&] { Sgd<double>({p[0], p[0]}, {.lr = 0.1}); }, "parameter 1 appears more than once");
  Var<double> made = make_var<double>(Tensor<double>::zeros({2}), {p[0]}, "twice", [](Node<double>&) {});
  check_throws_with([&] { Sgd<double>({made}, {.lr = 0.1}); }, "parameter 0 is not a leaf (it was computed by 'twice')");
}

BOOST_AUTO_TEST_CASE(step_refuses_a_bad_gradient_or_learning_rate) {
  auto p = one_param();
  Sgd<double> opt(p, {.lr = 0.1});
  p[0].grad() = Tensor<double>::ones({3});
  check_throws_with([&] { opt.step(); }, "gradient of parameter 0 has shape [3], expected the parameter's shape [2]");
  p[0].grad() = Tensor<double>::ones({2});
  opt.set_lr(-0.01);  // what a schedule stepped past its end may do
  check_throws_with([&] { opt.step(); }, "invalid learning rate -0.01");
  BOOST_TEST(p[0].value().to_vector() == std::vector<double>({0, 0}));
}

BOOST_AUTO_TEST_SUITE_END()
