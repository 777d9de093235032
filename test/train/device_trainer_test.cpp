#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/device_mlp.hpp"  // relative_difference
#include "../common/small_resnet.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(device_trainer_test)

namespace {

Tensor<float> images(std::int64_t n, std::uint64_t seed) {
  Rng rng(seed);
  Tensor<float> x({n, 3, 12, 12});
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
  return x;
}

std::vector<std::int64_t> labels(std::int64_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < n; ++i) out.push_back(static_cast<std::int64_t>(rng.below(5)));
  return out;
}

template <class T, class D>
double max_state_difference(Module<T, D>& device, Module<T>& cpu) {
  double worst = 0;
  const auto dp = device.named_parameters(), cp = cpu.named_parameters();
  BOOST_REQUIRE_EQUAL(dp.size(), cp.size());
  for (std::size_t i = 0; i < dp.size(); ++i) {
    BOOST_REQUIRE_EQUAL(dp[i].first, cp[i].first);
    worst = std::max(worst, test::relative_difference(dp[i].second.value().template to<Cpu>(), cp[i].second.value()));
  }
  const auto db = device.named_buffers(), cb = cpu.named_buffers();
  BOOST_REQUIRE_EQUAL(db.size(), cb.size());
  for (std::size_t i = 0; i < db.size(); ++i) {
    BOOST_REQUIRE_EQUAL(db[i].first, cb[i].first);
    worst = std::max(worst, test::relative_difference(db[i].second->template to<Cpu>(), *cb[i].second));
  }
  return worst;
}

const SgdOptions sgd_options{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3};
const TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

}  // namespace

BOOST_AUTO_TEST_CASE(a_device_resnet_starts_with_the_cpu_resnets_weights) {
  manual_seed(7);
  auto cpu = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  manual_seed(7);
  auto device = resnet18<float, HostEmulated>({.num_classes = 10, .cifar_stem = true});
  BOOST_TEST(max_state_difference(*device, *cpu) == 0.0);
  BOOST_TEST(device->parameter_count() == cpu->parameter_count());
}

BOOST_AUTO_TEST_CASE(training_on_a_device_equals_training_on_the_cpu) {
  auto cpu = test::small_resnet<float, Cpu>(3, 5);
  auto device = test::small_resnet<float, HostEmulated>(3, 5);
  BOOST_REQUIRE(max_state_difference(*device, *cpu) == 0.0);
  auto cpu_sgd = make<Sgd<float>>(cpu->parameters(), sgd_options);
  auto device_sgd = make<Sgd<float, HostEmulated>>(device->parameters(), sgd_options);
  Trainer<Sequential<float>> cpu_trainer(cpu, cpu_sgd, quiet);
  Trainer<Sequential<float, HostEmulated>> device_trainer(device, device_sgd, quiet);
  for (int step = 0; step < 4; ++step) {
    const Tensor<float> x = images(6, 100 + step);
    const auto y = labels(6, 200 + step);
    const EpochTotals want = cpu_trainer.train_step(x, y);
    const EpochTotals got = device_trainer.train_step(x, y);
    BOOST_TEST(got.loss_sum == want.loss_sum, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(got.metric_state == want.metric_state);
    BOOST_TEST(got.samples == want.samples);
  }
  // Weights, running statistics and num_batches_tracked (4) after four steps.
  BOOST_TEST(max_state_difference(*device, *cpu) <= 1e-5);
  BOOST_TEST(device->named_buffers().back().second->to_vector()[0] == 4.0f);

  // Evaluation mode: the running statistics normalise, on both.
  cpu->eval();
  device->eval();
  NoGradGuard no_grad;
  const Tensor<float> x = images(3, 300);
  const Tensor<float> want = cpu->forward(Var<float>(x)).value();
  const Tensor<float> got = device->forward(Var<float, HostEmulated>(x.to<HostEmulated>())).value().to<Cpu>();
  BOOST_TEST(test::relative_difference(got, want) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(gradient_accumulation_on_a_device_equals_the_cpu) {
  auto cpu = test::small_resnet<float, Cpu>(5, 5);
  auto device = test::small_resnet<float, HostEmulated>(5, 5);
  const TrainerOptions accumulate{.progress_bar = false, .print_epochs = false, .accumulation_steps = 2};
  Trainer<Sequential<float>> cpu_trainer(cpu, make<Sgd<float>>(cpu->parameters(), sgd_options), accumulate);
  Trainer<Sequential<float, HostEmulated>> device_trainer(
      device, make<Sgd<float, HostEmulated>>(device->parameters(), sgd_options), accumulate);
  for (int step = 0; step < 4; ++step) {
    cpu_trainer.train_step(images(4, 400 + step), labels(4, 500 + step));
    device_trainer.train_step(images(4, 400 + step), labels(4, 500 + step));
  }
  BOOST_TEST(device_trainer.global_step() == 2);
  BOOST_TEST(max_state_difference(*device, *cpu) <= 1e-5);
}

// A hook over one replica (it sums nothing) on a device: the global batch is the local one, so the
// synchronised path (moments, the merge, separate backward sums) equals the plain layer.
BOOST_AUTO_TEST_CASE(a_device_batch_norm_synchronised_over_one_replica_equals_the_plain_layer) {
  BatchNorm2d<double, HostEmulated> synced(3), plain(3);
  int calls = 0;
  synced.set_sync([&calls](std::span<double>) { ++calls; });
  Tensor<double> x({4, 3, 2, 3}), gy(x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    x[i] = std::sin(0.7 * static_cast<double>(i)) + static_cast<double>(i % 3);
    gy[i] = std::cos(0.3 * static_cast<double>(i));
  }
  const Var<double, HostEmulated> xs(x.to<HostEmulated>(), true), xp(x.to<HostEmulated>(), true);
  const Var<double, HostEmulated> ys = synced.forward(xs), yp = plain.forward(xp);
  backward(ys, gy.to<HostEmulated>());
  backward(yp, gy.to<HostEmulated>());
  BOOST_TEST(calls == 3);  // two sums in forward, one in backward
  const auto same = [](const Tensor<double, HostEmulated>& a, const Tensor<double, HostEmulated>& b) {
    return test::relative_difference(a.to<Cpu>(), b.to<Cpu>()) <= 1e-12;
  };
  BOOST_TEST(same(ys.value(), yp.value()));
  BOOST_TEST(same(xs.grad(), xp.grad()));
  BOOST_TEST(same(synced.weight.grad(), plain.weight.grad()));
  BOOST_TEST(same(synced.bias.grad(), plain.bias.grad()));
  BOOST_TEST(same(synced.running_mean, plain.running_mean));
  BOOST_TEST(same(synced.running_var, plain.running_var));
}

BOOST_AUTO_TEST_SUITE_END()
