#pragma once
// A 2-layer MLP (linear, relu, linear, cross_entropy) trained by SGD with momentum and weight
// decay on any device: the tests compare HostEmulated (and the CUDA check Cuda) with the CPU.
// The caller includes the device's ops (autograd/ops/*, optim/sgd.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/optim/sgd.hpp>

namespace ptrain::test {

// max |got - want| / max(1, max |want|) over a tensor; infinity when the shapes differ.
template <class T>
double relative_difference(const Tensor<T>& got, const Tensor<T>& want) {
  if (got.shape() != want.shape()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 1;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

template <class T>
struct MlpRun {
  std::vector<double> losses;    // before each step
  std::vector<Tensor<T>> params;  // w1, b1, w2, b2 after the last step
};

// Weights w1 [hidden, in], b1 [hidden], w2 [classes, hidden], b2 [classes] drawn from seed.
template <class T>
std::vector<Tensor<T>> mlp_weights(std::int64_t in, std::int64_t hidden, std::int64_t classes, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Tensor<T>> ws{Tensor<T>({hidden, in}), Tensor<T>({hidden}), Tensor<T>({classes, hidden}),
                            Tensor<T>({classes})};
  for (auto& w : ws)
    for (std::int64_t i = 0; i < w.numel(); ++i) w[i] = static_cast<T>(rng.uniform(-0.6, 0.6));
  return ws;
}

template <class T, class D>
MlpRun<T> train_mlp(const std::vector<Tensor<T>>& weights, const Tensor<T>& x, std::span<const std::int64_t> targets,
                    int steps) {
  std::vector<Var<T, D>> params;
  for (const auto& w : weights) params.emplace_back(w.template to<D>(), true);
  const Var<T, D> input(x.template to<D>());
  SgdOptions options;
  options.lr = 0.2;
  options.momentum = 0.9;
  options.weight_decay = 0.01;
  Sgd<T, D> optimizer(params, options);
  MlpRun<T> run;
  for (int s = 0; s < steps; ++s) {
    optimizer.zero_grad();
    const Var<T, D> hidden = relu(linear(input, params[0], params[1]));
    const Var<T, D> loss = cross_entropy(linear(hidden, params[2], params[3]), targets);
    run.losses.push_back(static_cast<double>(loss.value().to_vector()[0]));
    backward(loss);
    optimizer.step();
  }
  for (const auto& p : params) run.params.push_back(p.value().template to<Cpu>());
  return run;
}

}  // namespace ptrain::test
