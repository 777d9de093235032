#pragma once
// Device checks: device-generic autograd. The MLP of test/common/device_mlp.hpp (linear, relu,
// cross_entropy, Sgd<float, Cuda> with momentum and weight decay) trained on Var<float, Cuda> against
// the same on the CPU, and the HostEmulated run of the same algorithms against both.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/kernels/cuda/executor_for.cuh>
#include <ptrain/optim/sgd.hpp>

#include "../../common/device_mlp.hpp"
#include "checks/common.cuh"

namespace ptrain::device_checks {

namespace autograd_detail {
inline void expect_same_run(const test::MlpRun<float>& got, const test::MlpRun<float>& want, double tol,
                            const std::string& what) {
  bool ok = got.losses.size() == want.losses.size() && got.params.size() == want.params.size();
  for (std::size_t s = 0; ok && s < want.losses.size(); ++s)
    ok = std::abs(got.losses[s] - want.losses[s]) <= tol * std::abs(want.losses[s]);
  for (std::size_t i = 0; ok && i < want.params.size(); ++i)
    ok = test::relative_difference(got.params[i], want.params[i]) <= tol;
  expect(ok, what);
}
}  // namespace autograd_detail

inline void check_autograd() {
  using namespace autograd_detail;
  // Sizes past one GPU block per row and odd: 300 rows, 37 inputs, 129 hidden units, 10 classes.
  const auto weights = test::mlp_weights<float>(37, 129, 10, 31);
  const Tensor<float> x = signed_values<float>(Shape{300, 37}, 32, -1.0, 1.0);
  std::vector<std::int64_t> targets(300);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<std::int64_t>((i * 7) % 10);
  const auto cpu = test::train_mlp<float, Cpu>(weights, x, targets, 5);
  const auto gpu = test::train_mlp<float, Cuda>(weights, x, targets, 5);
  const auto emulated = test::train_mlp<float, HostEmulated>(weights, x, targets, 5);
  expect(cpu.losses.back() < cpu.losses.front(), "the MLP's loss falls over 5 SGD steps on the CPU");
  expect_same_run(gpu, cpu, 1e-4, "MLP on Var<float, Cuda>: 5 SGD steps match the CPU's within 1e-4");
  expect_same_run(gpu, emulated, 1e-4, "MLP on Var<float, Cuda>: 5 SGD steps match HostEmulated's within 1e-4");
}

}  // namespace ptrain::device_checks
