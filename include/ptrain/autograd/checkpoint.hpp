#pragma once
// run_checkpointed(f, x) as torch.utils.checkpoint.checkpoint(f.forward, x): forward runs without
// recording its graph, so none of its intermediate activations outlive it; one node keeps x, and its
// backward runs the forward again, now recording, and backpropagates through that graph. The
// generators forward draws from are set back to their states of the first run for the recompute
// (torch's preserve_rng_state), so dropout draws the same masks. Module::operator() runs a module
// this way once checkpoint_activations() is set on it (nn/module.hpp).
#include <functional>
#include <utility>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

template <class T, class D>
struct CheckpointedForward {
  using Function = std::function<Var<T, D>(const Var<T, D>&)>;
  Function forward;
  // What backward runs instead of forward, when the recompute must differ (a module's leaves its
  // running statistics alone, as the first run already updated them); forward when empty.
  Function recompute;
  // The leaves forward reads besides x (a module's parameters): inputs of the node, so that it is
  // recorded when x needs no gradient, and so that their on_grad_ready hooks fire once, when every
  // use of them in the outer graph is done, not inside the recompute's own backward pass.
  std::vector<Var<T, D>> parameters;
  // Generators forward draws from; global_rng() is always among them.
  std::vector<Rng*> generators;
};

namespace detail {
// Each generator at the state it had when forward first ran, for as long as this lives; then each
// back where it was.
class ReplayedGenerators {
 public:
  using States = std::vector<std::pair<Rng*, Rng>>;
  explicit ReplayedGenerators(const States& first_run) {
    for (const auto& [rng, state] : first_run) {
      current_.emplace_back(rng, *rng);
      *rng = state;
    }
  }
  ~ReplayedGenerators() {
    for (auto it = current_.rbegin(); it != current_.rend(); ++it) *it->first = it->second;
  }
  ReplayedGenerators(const ReplayedGenerators&) = delete;
  ReplayedGenerators& operator=(const ReplayedGenerators&) = delete;

 private:
  States current_;
};

// The parameters' on_grad_ready hooks held back while it lives: the recompute's own backward pass
// sees only this node's share of a parameter's gradient (ALBERT's shared layer, a tied decoder).
template <class T, class D>
class HeldBackGradHooks {
 public:
  explicit HeldBackGradHooks(const std::vector<typename Node<T, D>::Ptr>& leaves) {
    for (const auto& leaf : leaves)
      if (leaf && leaf->on_grad_ready) held_.emplace_back(leaf.get(), std::exchange(leaf->on_grad_ready, nullptr));
  }
  ~HeldBackGradHooks() {
    for (auto& [leaf, hook] : held_) leaf->on_grad_ready = std::move(hook);
  }
  HeldBackGradHooks(const HeldBackGradHooks&) = delete;
  HeldBackGradHooks& operator=(const HeldBackGradHooks&) = delete;

 private:
  std::vector<std::pair<Node<T, D>*, std::function<void(Node<T, D>&)>>> held_;
};
}  // namespace detail

// In recording mode, f.forward(x) kept as one node holding x (and the generators' states); with
// recording off (evaluation, NoGradGuard) simply f.forward(x).
template <class T, class D>
Var<T, D> run_checkpointed(CheckpointedForward<T, D> f, const Var<T, D>& x) {
  if (!GradMode::enabled()) return f.forward(x);
  detail::ReplayedGenerators::States first_run{{&global_rng(), global_rng()}};
  for (Rng* rng : f.generators)
    if (rng != &global_rng()) first_run.emplace_back(rng, *rng);
  Var<T, D> y;
  {
    NoGradGuard no_grad;
    y = f.forward(x);
  }
  std::vector<Var<T, D>> inputs{x};
  inputs.insert(inputs.end(), f.parameters.begin(), f.parameters.end());
  auto recompute = f.recompute ? std::move(f.recompute) : std::move(f.forward);
  return make_var<T, D>(
      y.value(), std::move(inputs), "checkpoint",
      [recompute = std::move(recompute), first_run = std::move(first_run)](Node<T, D>& self) {
        Var<T, D> input(self.inputs[0]->value, self.input_needs_grad(0));
        Var<T, D> output;
        {
          const GradModeGuard recording(true);
          const detail::ReplayedGenerators replayed(first_run);
          output = recompute(input);
        }
        check(output.shape() == self.value.shape(), "checkpoint: the recompute gave shape ", output.shape(),
              " where the first run gave ", self.value.shape(), " (a forward that depends on more than its input)");
        if (!output.requires_grad()) return;
        {
          const detail::HeldBackGradHooks<T, D> held({self.inputs.begin() + 1, self.inputs.end()});
          backward(output, self.grad_owned ? std::move(self.grad) : self.grad.clone());
        }
        if (self.input_needs_grad(0) && input.grad().defined())
          self.inputs[0]->accumulate(std::move(input.grad()));
      });
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::run_checkpointed)
