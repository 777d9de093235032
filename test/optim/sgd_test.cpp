#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include <ptrain/device/host_emulated.hpp>
#include <ptrain/optim/sgd.hpp>

#include "optim_test_util.hpp"

using namespace ptrain;
using namespace optim_test;

BOOST_AUTO_TEST_SUITE(sgd_test)

namespace {

// Expected values: torch.optim.SGD (PyTorch 1.13, float64) on the same run, printed by
// test/optim/make_references.py.
template <class D>
void check_sgd(SgdOptions options, const Rows& p, const Rows& q) {
  auto t = run_quadratic<D>([&](std::vector<Var<double, D>> ps) { return Sgd<double, D>(ps, options); });
  check_rows(t.p, p, 1e-13);
  check_rows(t.q, q, 1e-13);
}

template <class D>
std::vector<Var<double, D>> one_param() {
  return {Var<double, D>(Tensor<double, D>::zeros({2}), true)};
}

template <class D>
Var<double, D> param(std::vector<double> values, bool requires_grad = true) {
  const auto n = static_cast<std::int64_t>(values.size());
  return Var<double, D>(Tensor<double>::from({n}, values).template to<D>(), requires_grad);
}

}  // namespace

static_assert(Optimizer<Sgd<float>> && MomentumOptimizer<Sgd<double>> && MomentumOptimizer<Sgd<float, HostEmulated>>);

BOOST_AUTO_TEST_CASE_TEMPLATE(plain_matches_pytorch, D, Devices) {
  check_sgd<D>({.lr = 0.1},
            {{0.91, -1.93, 0.42}, {0.8290000000000001, -1.8635, 0.356}, {0.7561000000000001, -1.800325, 0.30479999999999996},
             {0.69049, -1.7403087499999998, 0.26383999999999996}},
            {{0.07499999999999998, -0.625}, {0.07499999999999998, -0.625}, {-0.04750000000000001, -0.5375},
             {-0.04750000000000001, -0.5375}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(momentum_matches_pytorch, D, Devices) {
  // The first step's buffer is the gradient itself (not (1 - dampening) times it).
  check_sgd<D>({.lr = 0.1, .momentum = 0.9},
            {{0.91, -1.93, 0.42}, {0.748, -1.8005, 0.284}, {0.5374, -1.623925, 0.12479999999999998},
             {0.3041199999999999, -1.41381125, -0.02344}},
            {{0.07499999999999998, -0.625}, {0.07499999999999998, -0.625}, {-0.20500000000000002, -0.425},
             {-0.20500000000000002, -0.425}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(dampening_matches_pytorch, D, Devices) {
  check_sgd<D>({.lr = 0.1, .momentum = 0.9, .dampening = 0.5},
            {{0.91, -1.93, 0.42}, {0.7885, -1.83375, 0.31599999999999995}, {0.644725, -1.71628125, 0.20079999999999995},
             {0.48809125, -1.58265234375, 0.08703999999999995}},
            {{0.07499999999999998, -0.625}, {0.07499999999999998, -0.625}, {-0.14375000000000002, -0.46875},
             {-0.14375000000000002, -0.46875}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(nesterov_matches_pytorch, D, Devices) {
  check_sgd<D>({.lr = 0.1, .momentum = 0.9, .nesterov = true},
            {{0.829, -1.867, 0.348}, {0.61759, -1.689935, 0.18895999999999996},
             {0.39458889999999996, -1.484047675, 0.05665919999999998},
             {0.184499119, -1.263811628375, -0.029929216000000005}},
            {{-0.08250000000000003, -0.5125}, {-0.08250000000000003, -0.5125}, {-0.367225, -0.3091249999999999},
             {-0.367225, -0.3091249999999999}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(weight_decay_matches_pytorch, D, Devices) {
  check_sgd<D>({.lr = 0.1, .momentum = 0.8, .weight_decay = 0.05},
            {{0.905, -1.92, 0.4175}, {0.743975, -1.7804, 0.28591249999999996},
             {0.547037625, -1.600798, 0.14203043749999997},
             {0.3420487743749999, -1.3990725099999999, 0.017808547812499975}},
            {{0.07375, -0.62125}, {0.07375, -0.62125}, {-0.18974375000000004, -0.42876875},
             {-0.18974375000000004, -0.42876875}});
  check_sgd<D>({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true},
            {{0.905, -1.9145, 0.41925}, {0.7794275, -1.7974235, 0.320184625},
             {0.63475957625, -1.6562930105, 0.2167680798125},
             {0.48180773040687497, -1.4983973028514999, 0.12070540428365623}},
            {{0.08137499999999999, -0.624125}, {0.08137499999999999, -0.624125},
             {-0.10947743750000001, -0.48165768750000004}, {-0.10947743750000001, -0.48165768750000004}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(float_matches_pytorch_float32, D, Devices) {
  Var<float, D> p(Tensor<float>::from({3}, {1.0f, -2.0f, 0.5f}).template to<D>(), true);
  Sgd<float, D> opt({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  const float a[3] = {1.0f, 0.5f, 2.0f}, b[3] = {0.1f, -0.3f, 0.2f};
  for (int k = 0; k < 4; ++k) {
    const Tensor<float> value = on_host(p.value());
    Tensor<float> grad({3});
    for (int i = 0; i < 3; ++i) grad[i] = a[i] * value[i] - b[i];
    p.grad() = on_device<D>(grad);
    opt.step();
  }
  const float want[3] = {0.17793482542037964f, -1.244992733001709f, -0.031520795077085495f};
  const Tensor<float> got = on_host(p.value());
  for (int i = 0; i < 3; ++i) BOOST_TEST(got[i] == want[i], boost::test_tools::tolerance(2e-6f));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(large_parameter_matches_elementwise_formula, D, Devices) {
  // Big enough for the chunked, threaded path, and not a multiple of the chunk.
  const std::int64_t n = 3 * kernels::cpu::update_chunk * 4 + 17;
  Tensor<double> init({n}), grad({n});
  for (std::int64_t i = 0; i < n; ++i) {
    init[i] = std::sin(0.001 * static_cast<double>(i));
    grad[i] = std::cos(0.003 * static_cast<double>(i));
  }
  Var<double, D> p(init.template to<D>(), true);
  const Tensor<double, D> device_grad = grad.template to<D>();
  const double lr = 0.05, mu = 0.9, wd = 0.01;
  Sgd<double, D> opt({p}, {.lr = lr, .momentum = mu, .weight_decay = wd, .nesterov = true});
  std::vector<double> ref = init.to_vector(), buf(static_cast<std::size_t>(n));
  for (int k = 0; k < 3; ++k) {
    p.grad() = device_grad;
    opt.step();
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double d = grad[static_cast<std::int64_t>(i)] + wd * ref[i];
      buf[i] = k == 0 ? d : mu * buf[i] + d;
      ref[i] -= lr * (d + mu * buf[i]);
    }
  }
  const Tensor<double> got = on_host(p.value());
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(got[i] - ref[static_cast<std::size_t>(i)]));
  BOOST_TEST(worst < 1e-14);
  BOOST_TEST(on_host(device_grad)[5] == std::cos(0.015));  // the gradient is read, never written
}

BOOST_AUTO_TEST_CASE_TEMPLATE(parameters_without_gradient_are_untouched, D, Devices) {
  auto used = param<D>({1, 2});
  auto no_grad = param<D>({3, 4});
  auto frozen = param<D>({5, 6}, false);
  frozen.grad() = Tensor<double, D>::ones({2});  // requires_grad off: skipped even with a gradient
  Sgd<double, D> opt({used, no_grad, frozen}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.1});
  used.grad() = Tensor<double, D>::ones({2});
  opt.step();
  BOOST_TEST(used.value().to_vector()[0] == 1 - 0.5 * (1 + 0.1 * 1));
  BOOST_TEST(no_grad.value().to_vector() == std::vector<double>({3, 4}));
  BOOST_TEST(frozen.value().to_vector() == std::vector<double>({5, 6}));
  const auto state = opt.state();
  BOOST_REQUIRE_EQUAL(state.tensors.size(), 1u);  // only the updated parameter has a buffer
  BOOST_TEST(state.tensors[0].first == "0.momentum_buffer");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(zero_grad_drops_or_zeroes, D, Devices) {
  Var<double, D> p(Tensor<double, D>::ones({2}), true);
  Sgd<double, D> opt({p}, {.lr = 0.1});
  p.grad() = Tensor<double, D>::ones({2});
  opt.zero_grad(false);
  BOOST_TEST(p.grad().to_vector() == std::vector<double>({0, 0}));
  opt.zero_grad();
  BOOST_TEST(!p.grad().defined());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(state_round_trip_resumes_exactly, D, Devices) {
  const SgdOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true};
  auto straight = run_quadratic<D>([&](auto ps) { return Sgd<double, D>(ps, options); });
  auto p = initial_p<D>();
  auto q = initial_q<D>();
  OptimizerState<double> saved;
  {
    Sgd<double, D> first({p, q}, options);
    for (int k = 0; k < 2; ++k) {
      quadratic_grads(p, q, k);
      first.step();
    }
    first.set_lr(0.2);
    saved = first.state();
    for (auto& [name, t] : saved.tensors) t = t.clone();  // what a checkpoint file would hold
  }
  Sgd<double, D> second({p, q}, options);
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

BOOST_AUTO_TEST_CASE_TEMPLATE(load_state_rejects_bad_entries, D, Devices) {
  Var<double, D> p(Tensor<double, D>::zeros({3}), true);
  Sgd<double, D> opt({p}, {.lr = 0.1, .momentum = 0.9});
  check_throws_with([&] { opt.load_state({{}, {{"0.momentum_buffer", Tensor<double>::zeros({4})}}}); },
                    "'0.momentum_buffer' has shape [4], expected [3]");
  check_throws_with([&] { opt.load_state({{}, {{"1.momentum_buffer", Tensor<double>::zeros({3})}}}); },
                    "index below 1");
  check_throws_with([&] { opt.load_state({{}, {{"0.exp_avg", Tensor<double>::zeros({3})}}}); },
                    "unknown name 'exp_avg'");
  check_throws_with([&] { opt.load_state({{{"betas", 0.9}}, {}}); }, "state scalar 'betas' is unknown");
  BOOST_TEST(opt.state().tensors.empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(invalid_options_are_refused, D, Devices) {
  check_throws_with([] { Sgd<double, D>(one_param<D>(), {.lr = -0.1}); }, "invalid learning rate -0.1");
  check_throws_with([] { Sgd<double, D>(one_param<D>(), {}); }, "lr was not set");
  check_throws_with([] { Sgd<double, D>(one_param<D>(), {.lr = 0.1, .momentum = -1}); }, "invalid momentum -1");
  check_throws_with([] { Sgd<double, D>(one_param<D>(), {.lr = 0.1, .weight_decay = -1}); }, "invalid weight_decay -1");
  check_throws_with([] { Sgd<double, D>(one_param<D>(), {.lr = 0.1, .nesterov = true}); },
                    "Nesterov momentum requires a momentum > 0 and zero dampening");
  check_throws_with([] { Sgd<double, D>(one_param<D>(), {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
                    "zero dampening");
  check_throws_with([] { Sgd<double, D>(std::vector<Var<double, D>>{}, {.lr = 0.1}); }, "empty parameter list");
  auto p = one_param<D>();
  check_throws_with([&] { Sgd<double, D>({p[0], p[0]}, {.lr = 0.1}); }, "parameter 1 appears more than once");
  Var<double, D> made = make_var<double, D>(Tensor<double, D>::zeros({2}), {p[0]}, "twice", [](Node<double, D>&) {});
  check_throws_with([&] { Sgd<double, D>({made}, {.lr = 0.1}); }, "parameter 0 is not a leaf (it was computed by 'twice')");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(step_refuses_a_bad_gradient_or_learning_rate, D, Devices) {
  auto p = one_param<D>();
  Sgd<double, D> opt(p, {.lr = 0.1});
  p[0].grad() = Tensor<double, D>::ones({3});
  check_throws_with([&] { opt.step(); }, "gradient of parameter 0 has shape [3], expected the parameter's shape [2]");
  p[0].grad() = Tensor<double, D>::ones({2});
  opt.set_lr(-0.01);  // what a schedule stepped past its end may do
  check_throws_with([&] { opt.step(); }, "invalid learning rate -0.01");
  BOOST_TEST(p[0].value().to_vector() == std::vector<double>({0, 0}));
}

// A checkpoint taken on one device resumes on the other: the state is the same host tensors.
BOOST_AUTO_TEST_CASE(state_moves_between_devices) {
  const SgdOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true};
  check_state_moves_between_devices<Sgd<double>, Sgd<double, HostEmulated>>(options, 2);
  check_state_moves_between_devices<Sgd<double, HostEmulated>, Sgd<double>>(options, 1);
  const SgdOptions damped{.lr = 0.05, .momentum = 0.8, .dampening = 0.3};
  check_state_moves_between_devices<Sgd<double, HostEmulated>, Sgd<double>>(damped, 3, 6);
}

BOOST_AUTO_TEST_SUITE_END()
