// MixedPrecision<Fp16 | Bf16, HostEmulated> (the device path, its casts and unscaling run by
// HostExecutor) against MixedPrecision<Fp16 | Bf16> on the CPU: a 16-bit MLP's steps with SGD on
// the fp32 masters, the loss scale under injected overflows, skipped steps, and one read of the
// inf flag per step.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/mixed_precision.hpp>

#include "../common/device_amp.hpp"
#include "../common/stdout_capture.hpp"

using namespace ptrain;
using ptrain::test::StdoutCapture;

BOOST_AUTO_TEST_SUITE(device_mixed_precision_test)

namespace {

// Host memory like HostEmulated, counting the device-to-host copies.
struct CountingDevice : HostEmulated {
  static inline int reads = 0;
  template <class T>
  static void copy_to_host(T* host_dst, const T* src, std::size_t count) {
    ++reads;
    Cpu::copy_to_host(host_dst, src, count);
  }
};

const std::vector<std::int64_t> targets{0, 3, 1, 4, 2, 2, 0, 1};

template <class T, class D>
test::AmpMlp<T, D> make_mlp(bool freeze_b1 = false) {
  auto m = test::amp_mlp<T, D>(6, 16, 5, 7);
  if (freeze_b1) m.weights[1].set_requires_grad(false);
  return m;
}

template <class T>
Tensor<T> inputs() {
  return tensor_cast<T>(tensor_cast<float>(random_tensor({8, 6}, 21)));
}

template <class T, class D>
std::vector<float> as_floats(const Tensor<T, D>& t) {
  return tensor_cast<float>(t.template to<Cpu>()).to_vector();
}

template <class T, class D>
bool same_bits(const Tensor<T, D>& a, const Tensor<T, D>& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

template <class Amp, class Model, class Opt, class T, class AfterBackward>
bool train_step(Amp& amp, Model& model, Opt& opt, const Tensor<T>& x, const AfterBackward& after_backward,
                std::vector<Tensor<float, typename Amp::device_type>>* master_gradients = nullptr) {
  return test::amp_train_step(amp, model, opt, x, targets, after_backward, master_gradients);
}

// poison 1: an inf written into w2's gradient; 2: a NaN; 0: nothing.
auto poisoner(int poison) {
  return [poison](auto& model) {
    if (poison) test::poison_w2(poison == 1 ? std::numeric_limits<float>::infinity() : std::nanf(""))(model);
  };
}
const auto no_change = [](auto&) {};

const SgdOptions sgd_options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};

// `steps` steps of the 16-bit MLP (b1 frozen) on the CPU and on HostEmulated: the masters, their
// gradients and the model's weights agree within tol, and the device's weights are its masters
// rounded. With same_gradients the CPU model's gradients are replaced by the device's before the
// policy reads them: what is left to differ is the policy and the optimizer.
template <class Precision>
void check_steps_match_cpu(int steps, bool same_gradients, double tol) {
  using T = typename MixedPrecision<Precision>::scalar_type;
  auto cpu = make_mlp<T, Cpu>(true);
  auto dev = make_mlp<T, HostEmulated>(true);
  const LossScalerOptions scaling{.initial_scale = std::same_as<Precision, Fp16> ? 4096.0 : 1.0,
                                  .dynamic = std::same_as<Precision, Fp16>};
  MixedPrecision<Precision> cpu_amp(cpu, scaling);
  MixedPrecision<Precision, HostEmulated> dev_amp(dev, scaling);
  dev_amp.setup(dev);
  Sgd<float> cpu_sgd(cpu_amp.master_parameters(), sgd_options);
  Sgd<float, HostEmulated> dev_sgd(dev_amp.master_parameters(), sgd_options);
  const Tensor<T> x = inputs<T>();
  const auto b1_before = as_floats(dev.weights[1].value());
  const auto device_gradients = [&](test::AmpMlp<T, Cpu>& model) {
    if (!same_gradients) return;
    for (std::size_t i = 0; i < 4; ++i)
      if (model.weights[i].grad().defined()) model.weights[i].grad() = dev.weights[i].grad().template to<Cpu>();
  };
  double worst = 0;
  std::vector<Tensor<float, HostEmulated>> dev_gradients;
  std::vector<Tensor<float>> cpu_gradients;
  for (int step = 0; step < steps; ++step) {
    BOOST_TEST_REQUIRE(train_step(dev_amp, dev, dev_sgd, x, no_change, &dev_gradients));
    BOOST_TEST_REQUIRE(train_step(cpu_amp, cpu, cpu_sgd, x, device_gradients, &cpu_gradients));
    for (std::size_t i = 0; i < 4; ++i) {
      BOOST_TEST_CONTEXT(Precision::name << " step " << step << " parameter " << i) {
        const auto& master = dev_amp.master_parameters()[i];
        const auto& cpu_master = cpu_amp.master_parameters()[i];
        BOOST_TEST(master.requires_grad() == (i != 1));
        const double value = test::relative_difference(master.value().template to<Cpu>(), cpu_master.value());
        const double weight = test::relative_difference(tensor_cast<float>(dev.weights[i].value().template to<Cpu>()),
                                                        tensor_cast<float>(cpu.weights[i].value()));
        BOOST_TEST(value <= tol);
        BOOST_TEST(weight <= tol);
        worst = std::max({worst, value, weight});
        if (i != 1) {
          BOOST_TEST(!master.grad().defined(), "the master kept its gradient after the step");
          const double grad = test::relative_difference(dev_gradients[i].template to<Cpu>(), cpu_gradients[i]);
          BOOST_TEST(grad <= tol);
          worst = std::max(worst, grad);
        }
        Tensor<T, HostEmulated> rounded(master.shape());
        kernels::indexed::cast(kernels::HostExecutor{}, master.value().data(), rounded.data(), master.numel());
        BOOST_TEST(same_bits(dev.weights[i].value(), rounded), "the weights are not the masters rounded");
      }
    }
  }
  BOOST_TEST(as_floats(dev.weights[1].value()) == b1_before, "the frozen bias moved");
  BOOST_TEST(dev_amp.loss_scale() == cpu_amp.loss_scale());
  BOOST_TEST_MESSAGE(Precision::name << (same_gradients ? ", same gradients" : "")
                                     << ": largest relative difference from the CPU " << worst);
}

struct Snapshot {
  std::vector<std::vector<float>> weights, masters;
};

template <class Amp, class Model>
Snapshot snapshot(const Amp& amp, const Model& model) {
  Snapshot s;
  for (std::size_t i = 0; i < model.weights.size(); ++i) {
    s.weights.push_back(as_floats(model.weights[i].value()));
    s.masters.push_back(as_floats(amp.master_parameters()[i].value()));
  }
  return s;
}

// The same steps, some poisoned, on the CPU and on HostEmulated: each gives the scale sequence
// `expected`, a poisoned step leaves the weights and masters as they were and prints Apex's line,
// and the two print the same lines.
template <class Precision>
void check_overflows(const LossScalerOptions& scaling, const std::vector<int>& poison,
                     const std::vector<double>& expected, const std::vector<std::string>& lines) {
  using T = typename MixedPrecision<Precision>::scalar_type;
  auto cpu = make_mlp<T, Cpu>();
  auto dev = make_mlp<T, HostEmulated>();
  MixedPrecision<Precision> cpu_amp(cpu, scaling);
  MixedPrecision<Precision, HostEmulated> dev_amp(dev, scaling);
  Sgd<float> cpu_sgd(cpu_amp.master_parameters(), sgd_options);
  Sgd<float, HostEmulated> dev_sgd(dev_amp.master_parameters(), sgd_options);
  const Tensor<T> x = inputs<T>();
  std::string cpu_text, dev_text;
  for (std::size_t s = 0; s < poison.size(); ++s) {
    BOOST_TEST_CONTEXT(Precision::name << " step " << s) {
      const Snapshot before = snapshot(dev_amp, dev);
      {
        StdoutCapture capture;
        train_step(cpu_amp, cpu, cpu_sgd, x, poisoner(poison[s]));
        cpu_text += capture.finish();
      }
      bool taken = false;
      {
        StdoutCapture capture;
        taken = train_step(dev_amp, dev, dev_sgd, x, poisoner(poison[s]));
        dev_text += capture.finish();
      }
      BOOST_TEST(taken == (poison[s] == 0));
      BOOST_TEST(dev_amp.loss_scale() == expected[s]);
      BOOST_TEST(cpu_amp.loss_scale() == expected[s]);
      const Snapshot after = snapshot(dev_amp, dev);
      if (poison[s]) {
        BOOST_TEST((after.weights == before.weights), "a skipped step changed the weights");
        BOOST_TEST((after.masters == before.masters), "a skipped step changed the masters");
        for (const auto& m : dev_amp.master_parameters()) BOOST_TEST(!m.grad().defined());
      } else {
        BOOST_TEST((after.masters != before.masters), "a clean step left the masters");
      }
    }
  }
  std::string want;
  for (const auto& line : lines) want += line + "\n";
  BOOST_TEST(dev_text == want);
  BOOST_TEST(cpu_text == want);
}

}  // namespace

// One step from the same 16-bit weights and inputs. The device's linear and cross_entropy round
// a few 16-bit results differently from the CPU's (by one unit in the last place), so the
// gradients differ by that much. Measured (max |difference| / max(1, max |CPU|) over values,
// master gradients and weights): fp16 1.2e-4, bf16 9.8e-4.
BOOST_AUTO_TEST_CASE(fp16_step_matches_cpu) { check_steps_match_cpu<Fp16>(1, false, 5e-4); }

BOOST_AUTO_TEST_CASE(bf16_step_matches_cpu) { check_steps_match_cpu<Bf16>(1, false, 4e-3); }

// Three steps from the same gradients: the policy (cast, unscale, copy back) and
// Sgd<float, HostEmulated> against the CPU's. Measured: 3.0e-8 for both (float rounding in the SGD step).
BOOST_AUTO_TEST_CASE(fp16_steps_on_the_same_gradients_match_cpu) { check_steps_match_cpu<Fp16>(3, true, 1e-6); }

BOOST_AUTO_TEST_CASE(bf16_steps_on_the_same_gradients_match_cpu) { check_steps_match_cpu<Bf16>(3, true, 1e-6); }

// Apex's rule with a window of 3: an overflow (inf, or NaN on step 6) halves the scale and skips
// the step; 3 clean steps in a row double it.
BOOST_AUTO_TEST_CASE(fp16_scale_sequence_under_injected_overflows) {
  check_overflows<Fp16>({.initial_scale = 1024, .scale_window = 3}, {0, 0, 0, 1, 0, 2, 0, 0, 0},
                        {1024, 1024, 2048, 1024, 1024, 512, 512, 512, 1024},
                        {"Gradient overflow. Skipping step, loss scale reduced to 1024.0",
                         "Gradient overflow. Skipping step, loss scale reduced to 512.0"});
}

BOOST_AUTO_TEST_CASE(bf16_keeps_scale_one) {
  using P = MixedPrecision<Bf16, HostEmulated>;
  BOOST_TEST(P::default_scaling().initial_scale == 1.0);
  BOOST_TEST(!P::default_scaling().dynamic);
  check_overflows<Bf16>(P::default_scaling(), {0, 1, 0, 0, 2, 0}, {1, 1, 1, 1, 1, 1},
                        {"Gradient overflow. Skipping step, loss scale stays 1.0",
                         "Gradient overflow. Skipping step, loss scale stays 1.0"});
}

// The inf check is one flag on the device, read back once per step whatever the parameter count,
// with or without an overflow.
BOOST_AUTO_TEST_CASE(one_device_read_per_step) {
  std::vector<Var<half, CountingDevice>> params;
  for (std::int64_t n : {3, 40000, 1, 17}) {
    std::vector<half> values(static_cast<std::size_t>(n), half(0.5f));
    params.emplace_back(Tensor<half, CountingDevice>::from({n}, values), true);
  }
  test::AmpMlp<half, CountingDevice> model{params};
  MixedPrecision<Fp16, CountingDevice> amp(model);
  for (int poisoned = 0; poisoned < 2; ++poisoned) {
    for (auto& p : params) p.grad() = Tensor<half, CountingDevice>::full(p.shape(), half(2.0f));
    if (poisoned) params[1].grad().data()[39999] = half(std::numeric_limits<float>::infinity());
    CountingDevice::reads = 0;
    StdoutCapture quiet;
    const bool proceed = amp.before_optimizer_step(model);
    BOOST_TEST(CountingDevice::reads == 1);
    BOOST_TEST(proceed == !poisoned);
    amp.step_decided(proceed);
    amp.after_optimizer_step(model);
    BOOST_TEST(CountingDevice::reads == 1, "the weights came back to the host");
  }
  const auto g = amp.master_parameters()[0].grad();  // undefined after the skipped step
  BOOST_TEST(!g.defined());
}

BOOST_AUTO_TEST_CASE(setup_rejects_another_model) {
  auto model = make_mlp<half, HostEmulated>();
  auto other = make_mlp<half, HostEmulated>();
  MixedPrecision<Fp16, HostEmulated> amp(model);
  model.weights[0].value().zero();
  amp.setup(model);  // the masters start from the model's weights now
  BOOST_TEST(as_floats(amp.master_parameters()[0].value()) == std::vector<float>(16 * 6, 0.0f));
  BOOST_CHECK_EXCEPTION(amp.setup(other), Error, [](const Error& e) {
    return std::string(e.what()).find("the Trainer's model is not the one this policy was made from") !=
           std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
