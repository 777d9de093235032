#pragma once
// A residual block with ResNet's stem and head on any device: conv-bn-relu-maxpool, conv-bn plus
// the shortcut, relu, global average pool, flatten, linear, cross_entropy, batch norm training.
// The tests compare HostEmulated (and the CUDA check Cuda) with the CPU. The caller includes the
// device's ops (autograd/ops/*). fused: the same network with batch_norm_relu and
// batch_norm_add_relu in place of batch norm, (add and) relu.
#include <cstdint>
#include <span>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/pool.hpp>
#include <ptrain/autograd/ops/shape.hpp>

namespace ptrain::test {

// v: x [N, C, H, W], conv1 [F, C, 3, 3], bn1 weight and bias [F], conv2 [F, F, 3, 3], bn2 weight
// and bias [F], fc weight [classes, F] and bias; running: the two batch norms' mean and var.
template <class V, class Running>
V residual_net(const std::vector<V>& v, std::vector<Running>& running, std::span<const std::int64_t> targets,
               bool fused = false) {
  const auto same = Conv2dOptions::square(1, 1);
  const V c1 = conv2d(v[0], v[1], V(), same);
  V h = fused ? batch_norm_relu(c1, v[2], v[3], running[0], running[1], true)
              : relu(batch_norm(c1, v[2], v[3], running[0], running[1], true));
  h = max_pool2d(h, 3, 2, 1);
  const V c2 = conv2d(h, v[4], V(), same);
  V out = fused ? batch_norm_add_relu(c2, h, v[5], v[6], running[2], running[3], true)
                : relu(add(batch_norm(c2, v[5], v[6], running[2], running[3], true), h));
  V pooled = flatten(adaptive_avg_pool2d(out, 1, 1));
  return cross_entropy(linear(pooled, v[7], v[8]), targets);
}

inline std::vector<Tensor<double>> residual_net_inputs(const Shape& x, std::int64_t filters, std::int64_t classes,
                                                       std::uint64_t seed) {
  const std::int64_t C = x[1], F = filters;
  return {random_tensor(x, seed),
          random_tensor({F, C, 3, 3}, seed + 1),
          random_tensor({F}, seed + 2, 0.5, 1.5),
          random_tensor({F}, seed + 3),
          random_tensor({F, F, 3, 3}, seed + 4),
          random_tensor({F}, seed + 5, 0.5, 1.5),
          random_tensor({F}, seed + 6),
          random_tensor({classes, F}, seed + 7),
          random_tensor({classes}, seed + 8)};
}

// Running statistics at PyTorch's start: mean 0, var 1, for two batch norms of `filters` channels.
template <class T, class D>
std::vector<Tensor<T, D>> fresh_running_statistics(std::int64_t filters) {
  std::vector<Tensor<T, D>> running;
  for (int i = 0; i < 4; ++i) running.push_back(Tensor<T>::full({filters}, T(i % 2)).template to<D>());
  return running;
}

// One forward and backward on device D, brought back to the host: the loss, every input's
// gradient, and the running statistics after the step.
template <class T>
struct ResidualStep {
  Tensor<T> loss;
  std::vector<Tensor<T>> grads, running;
};

template <class T, class D>
ResidualStep<T> residual_step(const std::vector<Tensor<T>>& inputs, std::span<const std::int64_t> targets,
                              bool fused = false) {
  std::vector<Var<T, D>> vars;
  for (const auto& t : inputs) vars.emplace_back(t.template to<D>(), true);
  auto running = fresh_running_statistics<T, D>(inputs[2].numel());
  const Var<T, D> loss = residual_net(vars, running, targets, fused);
  backward(loss);
  ResidualStep<T> step{loss.value().template to<Cpu>(), {}, {}};
  for (const auto& v : vars) step.grads.push_back(v.grad().template to<Cpu>());
  for (const auto& r : running) step.running.push_back(r.template to<Cpu>());
  return step;
}

}  // namespace ptrain::test
