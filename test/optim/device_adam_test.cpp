// DeviceAdam and DeviceAdamW on HostEmulated (the GPU algorithm run by HostExecutor) against the
// CPU's Adam and AdamW over several steps: weight decay, amsgrad, frozen parameters and
// parameters without a gradient on some steps.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/device_adam.hpp>

using namespace ptrain;

namespace {

static_assert(MomentumOptimizer<DeviceAdam<float, HostEmulated>>);
static_assert(MomentumOptimizer<DeviceAdamW<float, HostEmulated>>);

const std::vector<Shape> shapes{{4, 3}, {5}, {2, 2, 3}, {7}};

// Parameter 2 is frozen (requires_grad off, yet given a gradient); parameter 3 gets a gradient on
// even steps only.
template <class D>
std::vector<Var<float, D>> make_params() {
  std::vector<Var<float, D>> params;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    params.emplace_back(tensor_cast<float>(random_tensor(shapes[i], 40 + i)).to<D>(), i != 2);
  return params;
}

template <class D>
void set_grads(std::vector<Var<float, D>>& params, int step) {
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

// Runs the CPU optimizer and its device twin side by side for `steps` steps.
template <class CpuOpt, class DeviceOpt, class Options>
void check_matches_cpu(const Options& options, int steps = 6) {
  auto cpu = make_params<Cpu>();
  auto dev = make_params<HostEmulated>();
  const std::vector<Tensor<float>> frozen_before{cpu[2].value().clone()};
  CpuOpt cpu_opt(cpu, options);
  DeviceOpt dev_opt(dev, options);
  for (int s = 0; s < steps; ++s) {
    set_grads(cpu, s);
    set_grads(dev, s);
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
  const auto frozen = dev[2].value().template to<Cpu>().to_vector();
  BOOST_TEST(frozen == frozen_before[0].to_vector(), "the frozen parameter moved");
  // Parameter 3 took only the even steps: its state's step count (hence the bias correction) lags,
  // which the comparison above already holds the device to; it must also have moved.
  BOOST_TEST(dev[3].value().template to<Cpu>().to_vector() != tensor_cast<float>(random_tensor(shapes[3], 43)).to_vector());
}

template <class Opt, class Options>
std::string construction_error(const Options& options) {
  try {
    Opt opt(make_params<std::conditional_t<std::is_same_v<Opt, Adam<float>> || std::is_same_v<Opt, AdamW<float>>,
                                           Cpu, HostEmulated>>(),
            options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(device_adam_test)

BOOST_AUTO_TEST_CASE(adam_matches_cpu) {
  check_matches_cpu<Adam<float>, DeviceAdam<float, HostEmulated>>(AdamOptions{.lr = 0.01});
}

BOOST_AUTO_TEST_CASE(adam_with_weight_decay_matches_cpu) {
  check_matches_cpu<Adam<float>, DeviceAdam<float, HostEmulated>>(
      AdamOptions{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1});
}

BOOST_AUTO_TEST_CASE(adam_amsgrad_matches_cpu) {
  check_matches_cpu<Adam<float>, DeviceAdam<float, HostEmulated>>(
      AdamOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true});
}

BOOST_AUTO_TEST_CASE(adamw_matches_cpu) {
  check_matches_cpu<AdamW<float>, DeviceAdamW<float, HostEmulated>>(AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
}

BOOST_AUTO_TEST_CASE(adamw_amsgrad_matches_cpu) {
  check_matches_cpu<AdamW<float>, DeviceAdamW<float, HostEmulated>>(
      AdamWOptions{.lr = 0.03, .beta1 = 0.5, .weight_decay = 0.2, .amsgrad = true});
}

// make_adam picks the CPU's Adam or DeviceAdam by the parameters' device, with the options given.
BOOST_AUTO_TEST_CASE(make_adam_picks_the_optimizer_of_the_device) {
  const AdamOptions options{.lr = 0.02, .weight_decay = 0.1};
  auto cpu = make_adam(make_params<Cpu>(), options);
  auto dev = make_adam(make_params<HostEmulated>(), options);
  static_assert(std::is_same_v<decltype(cpu), std::shared_ptr<Adam<float>>>);
  static_assert(std::is_same_v<decltype(dev), std::shared_ptr<DeviceAdam<float, HostEmulated>>>);
  BOOST_TEST(cpu->options().weight_decay == 0.1);
  BOOST_TEST(dev->lr() == 0.02);
  BOOST_TEST(dev->params().size() == shapes.size());
}

// A parameter that never gets a gradient keeps its value and creates no state.
BOOST_AUTO_TEST_CASE(parameters_without_gradients_are_skipped) {
  auto dev = make_params<HostEmulated>();
  const auto before = dev[1].value().to<Cpu>().to_vector();
  DeviceAdam<float, HostEmulated> opt(dev, AdamOptions{.lr = 0.1, .weight_decay = 0.5});
  for (int s = 0; s < 3; ++s) {
    set_grads(dev, s);
    dev[1].zero_grad();
    opt.step();
  }
  BOOST_TEST(dev[1].value().to<Cpu>().to_vector() == before);
  BOOST_TEST(dev[0].value().to<Cpu>().to_vector() != tensor_cast<float>(random_tensor(shapes[0], 40)).to_vector());
}

// The CPU optimizers' checks, with their messages.
BOOST_AUTO_TEST_CASE(options_are_checked_as_on_the_cpu) {
  const AdamOptions bad_beta2{.beta2 = 1.0};
  const AdamWOptions bad_decay{.weight_decay = -1};
  const std::string adam = construction_error<DeviceAdam<float, HostEmulated>>(bad_beta2);
  const std::string adamw = construction_error<DeviceAdamW<float, HostEmulated>>(bad_decay);
  BOOST_TEST(adam.find("Adam: invalid beta2 1") != std::string::npos, adam);
  BOOST_TEST(adam == construction_error<Adam<float>>(bad_beta2));
  BOOST_TEST(adamw.find("AdamW: invalid weight_decay -1") != std::string::npos, adamw);
  BOOST_TEST(adamw == construction_error<AdamW<float>>(bad_decay));

  auto dev = make_params<HostEmulated>();
  DeviceAdam<float, HostEmulated> opt(dev, AdamOptions{});
  opt.set_momentum(1.5);  // allowed in between, refused by step
  set_grads(dev, 0);
  BOOST_CHECK_THROW(opt.step(), Error);
  BOOST_CHECK_THROW(opt.set_lr(std::nan("")), Error);
}

BOOST_AUTO_TEST_SUITE_END()
