#pragma once
// Device checks: the device-generic spatial ops (conv2d, batch_norm with running statistics,
// relu, max_pool2d, add, adaptive_avg_pool2d, flatten, linear, cross_entropy) as one residual
// network step (test/common/device_residual.hpp) on Var<float, Cuda> against the CPU's, and the same
// network with batch norm fused with relu and the residual add (batch_norm_relu, batch_norm_add_relu).
#include <cstdint>
#include <string>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/pool.hpp>
#include <ptrain/kernels/cuda/executor_for.cuh>

#include "../../common/device_mlp.hpp"
#include "../../common/device_residual.hpp"
#include "checks/common.cuh"

namespace ptrain::device_checks {

inline void check_autograd_spatial() {
  // Odd sizes, a batch past one image per GEMM chunk, channels past a warp.
  std::vector<Tensor<float>> inputs;
  for (const auto& t : test::residual_net_inputs({5, 3, 13, 11}, 40, 10, 41)) inputs.push_back(tensor_cast<float>(t));
  std::vector<std::int64_t> targets(5);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<std::int64_t>((i * 3) % 10);
  const auto cpu = test::residual_step<float, Cpu>(inputs, targets);
  const double tol = 1e-4;
  for (bool fused : {false, true}) {
    const auto gpu = test::residual_step<float, Cuda>(inputs, targets, fused);
    const std::string what =
        std::string(fused ? "fused " : "") + "residual network on Var<float, Cuda>: ";
    expect(test::relative_difference(gpu.loss, cpu.loss) <= tol, what + "loss matches the CPU");
    for (std::size_t i = 0; i < cpu.grads.size(); ++i)
      expect(test::relative_difference(gpu.grads[i], cpu.grads[i]) <= tol,
             what + "gradient of input " + std::to_string(i) + " matches the CPU");
    for (std::size_t i = 0; i < cpu.running.size(); ++i)
      expect(test::relative_difference(gpu.running[i], cpu.running[i]) <= tol,
             what + "running statistic " + std::to_string(i) + " matches the CPU");
  }
}

}  // namespace ptrain::device_checks
