#pragma once
// Device checks: MixedPrecision<Fp16, Cuda> (masters, casts and unscaling in kernels, one flag
// read per step) on a half MLP against the same on HostEmulated, a step skipped on an injected
// inf; Adam and AdamW on Var<float, Cuda> against HostEmulated.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/kernels/cuda/executor_for.cuh>
#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/mixed_precision.hpp>

#include "../../common/device_amp.hpp"
#include "checks/common.cuh"

namespace ptrain::device_checks {

namespace mixed_precision_detail {

// Largest relative difference (test::relative_difference) over a list of tensors, as float on the host.
template <class T, class D, class E>
double worst_difference(const std::vector<Var<T, D>>& got, const std::vector<Var<T, E>>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, test::relative_difference(tensor_cast<float>(got[i].value().template to<Cpu>()),
                                                      tensor_cast<float>(want[i].value().template to<Cpu>())));
  return worst;
}

inline void check_amp_step() {
  const std::vector<std::int64_t> targets{0, 3, 1, 4, 2, 2, 0, 1, 3, 4, 0};
  const Tensor<half> x = tensor_cast<half>(signed_values<float>(Shape{11, 37}, 41, -1.0, 1.0));
  auto gpu = test::amp_mlp<half, Cuda>(37, 129, 5, 42);
  auto emulated = test::amp_mlp<half, HostEmulated>(37, 129, 5, 42);
  const LossScalerOptions scaling{.initial_scale = 1024};
  MixedPrecision<Fp16, Cuda> gpu_amp(gpu, scaling);
  MixedPrecision<Fp16, HostEmulated> emulated_amp(emulated, scaling);
  const SgdOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  Sgd<float, Cuda> gpu_sgd(gpu_amp.master_parameters(), options);
  Sgd<float, HostEmulated> emulated_sgd(emulated_amp.master_parameters(), options);
  const auto nothing = [](auto&) {};
  const bool taken = test::amp_train_step(gpu_amp, gpu, gpu_sgd, x, targets, nothing);
  test::amp_train_step(emulated_amp, emulated, emulated_sgd, x, targets, nothing);
  expect(taken, "MixedPrecision<Fp16, Cuda>: a clean step is taken");
  const double masters = worst_difference(gpu_amp.master_parameters(), emulated_amp.master_parameters());
  const double weights = worst_difference(gpu.weights, emulated.weights);
  // The GPU's half GEMMs sum in another order than the host's: a half rounding apart at most.
  expect(masters <= 2e-3, "MixedPrecision<Fp16, Cuda>: the masters after one step match HostEmulated's within 2e-3 (" +
                              std::to_string(masters) + ")");
  expect(weights <= 2e-3, "MixedPrecision<Fp16, Cuda>: the half weights after one step match HostEmulated's within 2e-3 (" +
                              std::to_string(weights) + ")");

  std::vector<Tensor<half>> before;
  for (const auto& w : gpu.weights) before.push_back(w.value().to<Cpu>());
  const bool poisoned_taken =
      test::amp_train_step(gpu_amp, gpu, gpu_sgd, x, targets, test::poison_w2(std::numeric_limits<float>::infinity()));
  bool unchanged = true;
  for (std::size_t i = 0; i < before.size(); ++i)
    unchanged = unchanged && test::relative_difference(tensor_cast<float>(gpu.weights[i].value().to<Cpu>()),
                                                       tensor_cast<float>(before[i])) == 0;
  expect(!poisoned_taken && unchanged && gpu_amp.loss_scale() == 512,
         "MixedPrecision<Fp16, Cuda>: an inf in a gradient skips the step, weights untouched, scale halved to 512");
}

template <class GpuOpt, class EmulatedOpt, class Options>
void check_adam(const Options& options, const std::string& what) {
  const std::vector<Shape> shapes{{129, 37}, {129}, {5, 3, 3, 3}};
  std::vector<Var<float, Cuda>> gpu;
  std::vector<Var<float, HostEmulated>> emulated;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Tensor<float> p = signed_values<float>(shapes[i], 50 + i);
    gpu.emplace_back(p.to<Cuda>(), true);
    emulated.emplace_back(p.to<HostEmulated>(), true);
  }
  GpuOpt gpu_opt(gpu, options);
  EmulatedOpt emulated_opt(emulated, options);
  for (int step = 0; step < 4; ++step) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (i == 2 && step % 2 == 1) {  // skipped on odd steps
        gpu[i].zero_grad();
        emulated[i].zero_grad();
        continue;
      }
      const Tensor<float> g = signed_values<float>(shapes[i], 100 * step + i, step % 3 ? -0.3 : -2.0, step % 3 ? 0.3 : 2.0);
      gpu[i].grad() = g.to<Cuda>();
      emulated[i].grad() = g.to<HostEmulated>();
    }
    gpu_opt.step();
    emulated_opt.step();
  }
  const double worst = worst_difference(gpu, emulated);
  expect(worst <= 1e-5, what + ": 4 steps on Var<float, Cuda> match HostEmulated's within 1e-5 (" +
                            std::to_string(worst) + ")");
}

}  // namespace mixed_precision_detail

inline void check_mixed_precision() {
  using namespace mixed_precision_detail;
  check_amp_step();
  check_adam<Adam<float, Cuda>, Adam<float, HostEmulated>>(AdamOptions{.lr = 0.01, .weight_decay = 0.05}, "Adam");
  check_adam<Adam<float, Cuda>, Adam<float, HostEmulated>>(AdamOptions{.lr = 0.01, .amsgrad = true}, "Adam amsgrad");
  check_adam<AdamW<float, Cuda>, AdamW<float, HostEmulated>>(AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}, "AdamW amsgrad");
}

}  // namespace ptrain::device_checks
