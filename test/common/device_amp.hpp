#pragma once
// Mixed precision steps driven by hand on any device, as the Trainer drives its policy points: a
// 16-bit MLP (the weights of device_mlp.hpp) as the model, the loss scaled through cross_entropy's
// grad_scale. The caller includes the device's ops (autograd/ops/*) and optimizer.
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/parallel/mixed_precision.hpp>

#include "device_mlp.hpp"

namespace ptrain::test {

// The smallest model MixedPrecision takes: anything whose parameters() gives the Var<T, D>s.
template <class T, class D>
struct AmpMlp {
  std::vector<Var<T, D>> weights;  // w1, b1, w2, b2
  std::vector<Var<T, D>> parameters() const { return weights; }
  Var<T, D> forward(const Var<T, D>& x) const {
    return linear(relu(linear(x, weights[0], weights[1])), weights[2], weights[3]);
  }
};

// mlp_weights(in, hidden, classes, seed) rounded to T, on D.
template <class T, class D>
AmpMlp<T, D> amp_mlp(std::int64_t in, std::int64_t hidden, std::int64_t classes, std::uint64_t seed) {
  AmpMlp<T, D> m;
  for (const auto& w : mlp_weights<float>(in, hidden, classes, seed))
    m.weights.emplace_back(tensor_cast<T>(w).template to<D>(), true);
  return m;
}

// One step: zero the gradients, forward, the loss's gradient times amp.loss_scale(), backward,
// after_backward(model) (to inject gradients), before_optimizer_step, the optimizer's step unless
// skipped, step_decided, after_optimizer_step. Returns whether the step was taken. With
// master_gradients, copies of the masters' gradients as the optimizer read them (after the step
// the masters let go of them).
template <class Amp, class Model, class Opt, class T, class AfterBackward>
bool amp_train_step(Amp& amp, Model& model, Opt& opt, const Tensor<T>& x, std::span<const std::int64_t> targets,
                    const AfterBackward& after_backward,
                    std::vector<Tensor<float, typename Amp::device_type>>* master_gradients = nullptr) {
  using D = typename Amp::device_type;
  for (auto& w : model.weights) w.zero_grad();
  const Var<T, D> loss = cross_entropy(model.forward(Var<T, D>(x.template to<D>())), targets, 0.0, amp.loss_scale());
  backward(loss);
  after_backward(model);
  const bool proceed = amp.before_optimizer_step(model);
  if (master_gradients) {
    master_gradients->clear();
    for (const auto& m : amp.master_parameters())
      master_gradients->push_back(m.grad().defined() ? m.grad().clone() : Tensor<float, D>());
  }
  if (proceed) {
    NoGradGuard no_grad;
    opt.step();
  }
  amp.step_decided(proceed);
  amp.after_optimizer_step(model);
  return proceed;
}

// An after_backward that writes bad (inf or NaN) into element 5 of w2's gradient.
inline auto poison_w2(float bad) {
  return [bad](auto& model) {
    using Grad = std::decay_t<decltype(model.weights[2].grad())>;
    const typename Grad::value_type value(bad);
    Grad::device_type::copy_from_host(model.weights[2].grad().data() + 5, &value, 1);
  };
}

}  // namespace ptrain::test
