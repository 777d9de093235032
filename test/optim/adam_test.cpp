#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/optim/adam.hpp>

#include "optim_test_util.hpp"

using namespace ptrain;
using namespace optim_test;

BOOST_AUTO_TEST_SUITE(adam_test)

namespace {

// Expected values: torch.optim.Adam / AdamW (PyTorch 1.13, float64) on the same run, printed
// by test/optim/make_references.py. q skips every other step, so its bias correction uses its
// own step count (2 at the third step), as PyTorch's per-parameter state['step'].
template <class Opt, class Options>
void check_adam(Options options, const Rows& p, const Rows& q) {
  using D = typename Opt::device_type;
  auto t = run_quadratic<D>([&](std::vector<Var<double, D>> ps) { return Opt(ps, options); });
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

// Several steps of float parameters on HostEmulated (the GPU algorithm) against the same on the
// CPU: parameter 2 is frozen (requires_grad off, yet given a gradient); parameter 3 gets a
// gradient on even steps only, so its step count (hence its bias correction) lags.
const std::vector<Shape> shapes{{4, 3}, {5}, {2, 2, 3}, {7}};

template <class D>
std::vector<Var<float, D>> float_params() {
  std::vector<Var<float, D>> params;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    params.emplace_back(tensor_cast<float>(random_tensor(shapes[i], 40 + i)).to<D>(), i != 2);
  return params;
}

template <class D>
void set_float_grads(std::vector<Var<float, D>>& params, int step) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].zero_grad();
    if (i == 3 && step % 2 == 1) continue;
    // Gradients of either sign and a few magnitudes, so that amsgrad's max switches between steps.
    const double size = step % 3 == 0 ? 2.0 : 0.3;
    params[i].grad() = tensor_cast<float>(random_tensor(shapes[i], 100 * step + i, -size, size)).to<D>();
  }
}

double max_relative_difference(const Tensor<float>& got, const Tensor<float>& want) {
  double worst = 0;
  for (std::int64_t k = 0; k < want.numel(); ++k)
    worst = std::max(worst, std::abs(static_cast<double>(got[k]) - want[k]) / (1e-3 + std::abs(want[k])));
  return worst;
}

template <class CpuOpt, class DeviceOpt, class Options>
void check_host_emulated_matches_cpu(const Options& options, int steps = 6) {
  auto cpu = float_params<Cpu>();
  auto dev = float_params<HostEmulated>();
  const std::vector<float> frozen_before = cpu[2].value().to_vector();
  CpuOpt cpu_opt(cpu, options);
  DeviceOpt dev_opt(dev, options);
  for (int s = 0; s < steps; ++s) {
    set_float_grads(cpu, s);
    set_float_grads(dev, s);
    if (s == 3) {  // a schedule's change takes effect on both
      cpu_opt.set_lr(options.lr * 0.5);
      dev_opt.set_lr(options.lr * 0.5);
    }
    cpu_opt.step();
    dev_opt.step();
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      const double diff = max_relative_difference(dev[i].value().template to<Cpu>(), cpu[i].value());
      BOOST_TEST(diff <= 1e-6, "step " << s << " parameter " << i << ": relative difference " << diff);
    }
  }
  BOOST_TEST(dev_opt.lr() == options.lr * 0.5);
  BOOST_TEST(dev[2].value().to_vector() == frozen_before, "the frozen parameter moved");
  BOOST_TEST(dev[3].value().to_vector() != tensor_cast<float>(random_tensor(shapes[3], 43)).to_vector());
}

}  // namespace

static_assert(Optimizer<Adam<float>> && MomentumOptimizer<Adam<double>> && MomentumOptimizer<AdamW<float>>);
static_assert(MomentumOptimizer<Adam<float, HostEmulated>> && MomentumOptimizer<AdamW<float, HostEmulated>>);

BOOST_AUTO_TEST_CASE_TEMPLATE(adam_matches_pytorch, D, Devices) {
  check_adam<Adam<double, D>>(
      AdamOptions{.lr = 0.1},
      {{0.9000000011111111, -1.9000000014285714, 0.40000000125}, {0.8004787097228273, -1.8002614723173964, 0.301742494455212},
       {0.7018543182406699, -1.7009900289917257, 0.20739496893982623}, {0.6046364743478134, -1.6024175845659587, 0.12023819244651762}},
      {{0.1500000005714286, -0.6500000008}, {0.1500000005714286, -0.6500000008},
       {0.050923239290897065, -0.5516215183020408}, {0.050923239290897065, -0.5516215183020408}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(adam_weight_decay_matches_pytorch, D, Devices) {
  check_adam<Adam<double, D>>(
      AdamOptions{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0.1},
      {{0.9000000999998999, -1.9000001111109877, 0.40000011764692045}, {0.8005105354130869, -1.8002615766966907, 0.3018127855989995},
       {0.7019767052046987, -1.7009857188959177, 0.20775799561228453}, {0.6049464080606284, -1.6023958145698405, 0.1215757094897595}},
      {{0.15000005633799643, -0.6500000754716412}, {0.15000005633799643, -0.6500000754716412},
       {0.05101782282608733, -0.5516492830259987}, {0.05101782282608733, -0.5516492830259987}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(amsgrad_matches_pytorch, D, Devices) {
  // beta2 = 0.5 lets v shrink, so the running maximum differs from v by the third step.
  const Rows q = {{0.15000000057142854, -0.6500000008}, {0.15000000057142854, -0.6500000008},
                  {0.047708421621449615, -0.546920733926991}, {0.047708421621449615, -0.546920733926991}};
  check_adam<Adam<double, D>>(
      AdamOptions{.lr = 0.1, .beta2 = 0.5, .amsgrad = true},
      {{0.9000000011111111, -1.9000000014285714, 0.40000000125}, {0.7984780971252188, -1.7990104701232303, 0.2968162062308102},
       {0.6959317191177445, -1.6963163666565624, 0.20318926696219625}, {0.5974396883173103, -1.5947120484469757, 0.12449175150660076}},
      q);
  check_adam<Adam<double, D>>(
      AdamOptions{.lr = 0.1, .beta2 = 0.5},
      {{0.9000000011111111, -1.9000000014285714, 0.40000000125}, {0.7984780971252188, -1.7990104701232303, 0.2968162062308102},
       {0.6941892433104861, -1.6963163666565624, 0.18707337421098352}, {0.5855832482138802, -1.5911548102956208, 0.06638249495396774}},
      q);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(adamw_matches_pytorch, D, Devices) {
  BOOST_TEST(AdamWOptions{}.weight_decay == 1e-2);
  check_adam<AdamW<double, D>>(
      AdamWOptions{.lr = 0.1},
      {{0.8990000011111111, -1.8980000014285714, 0.39950000125}, {0.7985866081905089, -1.7963703425123103, 0.30085848046330044},
       {0.6991837229292289, -1.6953219810221993, 0.20626176371064003}, {0.6013078201693656, -1.595092941627785, 0.11901617887586444}},
      {{0.14975000057142857, -0.6492500008}, {0.14975000057142857, -0.6492500008},
       {0.050527184589343355, -0.550243664402233}, {0.050527184589343355, -0.550243664402233}});
  check_adam<AdamW<double, D>>(
      AdamWOptions{.lr = 0.05, .beta2 = 0.5, .weight_decay = 0.3, .amsgrad = true},
      {{0.9350000005555555, -1.9200000007142857, 0.442500000625}, {0.8704748350363479, -1.8408028754300936, 0.3848897659199226},
       {0.8060682159921255, -1.7621340727744268, 0.32872172291459034}, {0.7431429546886076, -1.6846365022533614, 0.27654442069561563}},
      {{0.19625000028571427, -0.6887500004}, {0.19625000028571427, -0.6887500004},
       {0.14267150903807319, -0.6274253570158108}, {0.14267150903807319, -0.6274253570158108}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(float_matches_pytorch_float32, D, Devices) {
  Var<float, D> p(Tensor<float>::from({3}, {1.0f, -2.0f, 0.5f}).template to<D>(), true);
  AdamW<float, D> opt({p}, {.lr = 0.1, .weight_decay = 0.1});
  const float a[3] = {1.0f, 0.5f, 2.0f}, b[3] = {0.1f, -0.3f, 0.2f};
  for (int k = 0; k < 4; ++k) {
    const Tensor<float> value = on_host(p.value());
    Tensor<float> grad({3});
    for (int i = 0; i < 3; ++i) grad[i] = a[i] * value[i] - b[i];
    p.grad() = on_device<D>(grad);
    opt.step();
  }
  const float want[3] = {0.5718682408332825f, -1.5302367210388184f, 0.10828350484371185f};
  const Tensor<float> got = on_host(p.value());
  for (int i = 0; i < 3; ++i) BOOST_TEST(got[i] == want[i], boost::test_tools::tolerance(2e-6f));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(large_parameter_matches_elementwise_formula, D, Devices) {
  // Big enough for the chunked, threaded path, and not a multiple of the chunk.
  const std::int64_t n = 12 * kernels::cpu::update_chunk + 5;
  Tensor<double> init({n});
  for (std::int64_t i = 0; i < n; ++i) init[i] = std::sin(0.001 * static_cast<double>(i));
  Var<double, D> p(init.template to<D>(), true);
  const double lr = 0.01, b1 = 0.9, b2 = 0.5, eps = 1e-8, wd = 0.1;
  Adam<double, D> opt({p}, {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd, .amsgrad = true});
  std::vector<double> ref = init.to_vector(), m(ref.size()), v(ref.size()), vmax(ref.size());
  for (int k = 1; k <= 3; ++k) {
    Tensor<double> grad({n});
    for (std::int64_t i = 0; i < n; ++i) grad[i] = std::cos(0.003 * static_cast<double>(i) * k);
    p.grad() = on_device<D>(grad);
    opt.step();
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double g = std::cos(0.003 * static_cast<double>(i) * k) + wd * ref[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      const double denom = std::sqrt(vmax[i]) / std::sqrt(1 - std::pow(b2, k)) + eps;
      ref[i] -= lr / (1 - std::pow(b1, k)) * m[i] / denom;
    }
  }
  const Tensor<double> got = on_host(p.value());
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(got[i] - ref[static_cast<std::size_t>(i)]));
  BOOST_TEST(worst < 1e-13);
}

// amsgrad's running maximum is torch.maximum, which keeps a NaN from either side (a plain max that
// preferred the old value hid a NaN second moment).
BOOST_AUTO_TEST_CASE_TEMPLATE(amsgrad_maximum_keeps_nan, D, Devices) {
  auto p = param<D>({1, 2});
  Adam<double, D> opt({p}, {.lr = 0.1, .amsgrad = true});
  p.grad() = on_device<D>(Tensor<double>::from({2}, {std::nan(""), 1}));
  opt.step();
  for (const auto& [name, t] : opt.state().tensors)
    if (name == "0.max_exp_avg_sq") {
      BOOST_TEST(std::isnan(t[0]));
      BOOST_TEST(std::isfinite(t[1]));
    }
  BOOST_TEST(opt.state().tensors.size() == 4u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(parameters_without_gradient_are_untouched, D, Devices) {
  auto used = param<D>({1, 2});
  auto no_grad = param<D>({3, 4});
  auto frozen = param<D>({5, 6}, false);
  frozen.grad() = Tensor<double, D>::ones({2});
  AdamW<double, D> opt({used, no_grad, frozen}, {.lr = 0.5, .weight_decay = 0.5});
  used.grad() = Tensor<double, D>::ones({2});
  opt.step();
  BOOST_TEST(used.value().to_vector()[0] != 1.0);
  // No weight decay either: a skipped parameter is not touched at all.
  BOOST_TEST(no_grad.value().to_vector() == std::vector<double>({3, 4}));
  BOOST_TEST(frozen.value().to_vector() == std::vector<double>({5, 6}));
  std::vector<std::string> names;
  for (const auto& [name, t] : opt.state().tensors) names.push_back(name);
  BOOST_TEST(names == std::vector<std::string>({"0.step", "0.exp_avg", "0.exp_avg_sq"}));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(state_round_trip_resumes_exactly, D, Devices) {
  const AdamOptions options{.lr = 0.1, .beta2 = 0.5, .weight_decay = 0.05, .amsgrad = true};
  auto straight = run_quadratic<D>([&](auto ps) { return Adam<double, D>(ps, options); });
  auto p = initial_p<D>();
  auto q = initial_q<D>();
  OptimizerState<double> saved;
  {
    Adam<double, D> first({p, q}, options);
    for (int k = 0; k < 3; ++k) {
      quadratic_grads(p, q, k);
      first.step();
    }
    saved = first.state();
    for (auto& [name, t] : saved.tensors) t = t.clone();
  }
  int q_steps = 0;
  for (const auto& [name, t] : saved.tensors)
    if (name == "1.step") q_steps = static_cast<int>(t[0]);
  BOOST_TEST(q_steps == 2);  // q took 2 of the 3 steps
  Adam<double, D> second({p, q}, options);
  second.load_state(saved);
  quadratic_grads(p, q, 3);
  second.step();
  check_rows({p.value().to_vector()}, {straight.p[3]}, 1e-15);
  check_rows({q.value().to_vector()}, {straight.q[3]}, 1e-15);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(load_state_rejects_bad_entries, D, Devices) {
  Var<double, D> p(Tensor<double, D>::zeros({3}), true);
  Adam<double, D> opt({p}, {.amsgrad = true});
  const auto z = Tensor<double>::zeros({3});
  check_throws_with([&] { opt.load_state({{}, {{"0.step", Tensor<double>::ones({1})}, {"0.exp_avg", z}, {"0.exp_avg_sq", z}}}); },
                    "saved state of parameter 0 is incomplete");
  check_throws_with([&] { opt.load_state({{}, {{"0.step", Tensor<double>::full({1}, 0.5)}}}); },
                    "expected a step count >= 1");
  check_throws_with([&] { opt.load_state({{}, {{"0.exp_avg", Tensor<double>::zeros({3, 1})}}}); },
                    "'0.exp_avg' has shape [3, 1], expected [3]");
  check_throws_with([&] { opt.load_state({{}, {{"x.exp_avg", z}}}); }, "does not name a parameter");
  Adam<double, D> plain({p});
  check_throws_with([&] { plain.load_state({{}, {{"0.step", Tensor<double>::ones({1})}, {"0.exp_avg", z},
                                                  {"0.exp_avg_sq", z}, {"0.max_exp_avg_sq", z}}}); },
                    "has extra entries");
  BOOST_TEST(opt.state().tensors.empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(invalid_options_are_refused, D, Devices) {
  check_throws_with([] { Adam<double, D>(one_param<D>(), {.lr = -1}); }, "Adam: invalid learning rate -1");
  check_throws_with([] { AdamW<double, D>(one_param<D>(), {.lr = -1}); }, "AdamW: invalid learning rate -1");
  check_throws_with([] { Adam<double, D>(one_param<D>(), {.beta1 = 1.0}); }, "invalid beta1 1, expected in [0, 1)");
  check_throws_with([] { Adam<double, D>(one_param<D>(), {.beta2 = -0.1}); }, "invalid beta2 -0.1");
  check_throws_with([] { Adam<double, D>(one_param<D>(), {.eps = -1e-8}); }, "invalid epsilon");
  check_throws_with([] { AdamW<double, D>(one_param<D>(), {.weight_decay = -0.01}); }, "invalid weight_decay -0.01");
  auto p = one_param<D>();
  Adam<double, D> opt(p);
  opt.set_momentum(1.2);  // what a momentum schedule stepped past its end may do
  p[0].grad() = Tensor<double, D>::ones({2});
  check_throws_with([&] { opt.step(); }, "invalid beta1 1.2");
}

// HostEmulated (the GPU algorithm) against the CPU over six steps of float parameters, some frozen
// or skipped, the learning rate changed halfway.
using CpuAdam = Adam<float>;
using DeviceAdam = Adam<float, HostEmulated>;
using CpuAdamW = AdamW<float>;
using DeviceAdamW = AdamW<float, HostEmulated>;

BOOST_AUTO_TEST_CASE(adam_on_host_emulated_matches_cpu) {
  check_host_emulated_matches_cpu<CpuAdam, DeviceAdam>(AdamOptions{.lr = 0.01});
}

BOOST_AUTO_TEST_CASE(adam_with_weight_decay_on_host_emulated_matches_cpu) {
  check_host_emulated_matches_cpu<CpuAdam, DeviceAdam>(
      AdamOptions{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1});
}

BOOST_AUTO_TEST_CASE(adam_amsgrad_on_host_emulated_matches_cpu) {
  check_host_emulated_matches_cpu<CpuAdam, DeviceAdam>(AdamOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true});
}

BOOST_AUTO_TEST_CASE(adamw_on_host_emulated_matches_cpu) {
  check_host_emulated_matches_cpu<CpuAdamW, DeviceAdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
}

BOOST_AUTO_TEST_CASE(adamw_amsgrad_on_host_emulated_matches_cpu) {
  check_host_emulated_matches_cpu<CpuAdamW, DeviceAdamW>(
      AdamWOptions{.lr = 0.03, .beta1 = 0.5, .weight_decay = 0.2, .amsgrad = true});
}

// A checkpoint taken on one device resumes on the other: the state is the same host tensors,
// step counts included (q skips every other step).
BOOST_AUTO_TEST_CASE(state_moves_between_devices) {
  const AdamOptions options{.lr = 0.1, .beta2 = 0.5, .weight_decay = 0.05, .amsgrad = true};
  check_state_moves_between_devices<Adam<double>, Adam<double, HostEmulated>>(options, 3, 6);
  check_state_moves_between_devices<Adam<double, HostEmulated>, Adam<double>>(options, 2, 5);
  const AdamWOptions decoupled{.lr = 0.05, .weight_decay = 0.3};
  check_state_moves_between_devices<AdamW<double, HostEmulated>, AdamW<double>>(decoupled, 1);
  check_state_moves_between_devices<AdamW<double>, AdamW<double, HostEmulated>>(decoupled, 3);
}

BOOST_AUTO_TEST_SUITE_END()
