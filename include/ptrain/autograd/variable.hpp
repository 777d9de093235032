#pragma once
// Var<T, D>: a tensor on device D (Cpu unless named) that remembers how it was made. Each op
// appends a Node holding its output, its inputs and a hand-written backward; backward() replays
// the nodes in reverse.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/core/prebuilt.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

// Recording on or off for this thread (off inside evaluation and optimizer steps).
class GradMode {
 public:
  static bool enabled() { return flag(); }
  static void set(bool on) { flag() = on; }

 private:
  static bool& flag() {
    thread_local bool on = true;
    return on;
  }
};

// Recording on or off while it lives, then as it was.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : previous_(GradMode::enabled()) { GradMode::set(on); }
  ~GradModeGuard() { GradMode::set(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

template <class T, class D = Cpu>
struct Node {
  using Ptr = std::shared_ptr<Node>;

  Tensor<T, D> value;
  Tensor<T, D> grad;
  // A gradient handed over by an op may be shared with another input's; it is copied
  // before the first in-place accumulation.
  bool grad_owned = false;
  bool requires_grad = false;
  const char* op = "leaf";
  std::vector<Ptr> inputs;
  // Reads this->grad and accumulates into the inputs that need a gradient.
  std::function<void(Node&)> backward;
  // Leaves only: called once per backward pass, when this leaf's gradient is final.
  std::function<void(Node&)> on_grad_ready;

  bool is_leaf() const { return !backward; }
  bool input_needs_grad(std::size_t i) const { return inputs[i] && inputs[i]->requires_grad; }

  void accumulate(Tensor<T, D> g, bool owned = true) {
    check(g.shape() == value.shape(), "autograd: gradient of shape ", g.shape(), " for a ", op,
          " output of shape ", value.shape());
    if (!grad.defined()) {
      grad = std::move(g);
      grad_owned = owned;
      return;
    }
    if (!grad_owned) {
      grad = grad.clone();
      grad_owned = true;
    }
    kernels::add_into(kernels::executor_for<D>{}, grad.data(), g.data(), grad.numel());
  }
};

template <class T, class D = Cpu>
class Var {
 public:
  using NodePtr = typename Node<T, D>::Ptr;
  using device_type = D;

  Var() = default;
  explicit Var(Tensor<T, D> value, bool requires_grad = false) : node_(std::make_shared<Node<T, D>>()) {
    node_->value = std::move(value);
    node_->requires_grad = requires_grad;
  }
  explicit Var(NodePtr node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const Tensor<T, D>& value() const { return node_->value; }
  Tensor<T, D>& value() { return node_->value; }
  const Tensor<T, D>& grad() const { return node_->grad; }
  Tensor<T, D>& grad() { return node_->grad; }
  const Shape& shape() const { return node_->value.shape(); }
  std::int64_t size(int dim) const { return node_->value.size(dim); }
  std::int64_t numel() const { return node_->value.numel(); }
  bool requires_grad() const { return node_->requires_grad; }
  void set_requires_grad(bool on) { node_->requires_grad = on; }
  bool is_leaf() const { return node_->is_leaf(); }
  // The same value, cut off from the graph.
  Var detach() const { return Var(node_->value, false); }
  void zero_grad() {
    node_->grad = Tensor<T, D>();
    node_->grad_owned = false;
  }
  // A leaf's gradient is final for this pass: the hook data-parallel reduction starts from.
  void on_grad_ready(std::function<void(Node<T, D>&)> hook) { node_->on_grad_ready = std::move(hook); }

  const NodePtr& node() const { return node_; }

 private:
  NodePtr node_;
};

// Make an op's output. When no input needs a gradient (or recording is off) the output is a
// plain constant and no backward is kept.
template <class T, class D = Cpu, class Backward>
Var<T, D> make_var(Tensor<T, D> value, std::vector<Var<T, D>> inputs, const char* op, Backward&& backward) {
  bool needs = false;
  if (GradMode::enabled())
    for (const auto& in : inputs) needs = needs || (in.defined() && in.requires_grad());
  if (!needs) return Var<T, D>(std::move(value), false);
  auto node = std::make_shared<Node<T, D>>();
  node->value = std::move(value);
  node->requires_grad = true;
  node->op = op;
  node->inputs.reserve(inputs.size());
  for (auto& in : inputs) node->inputs.push_back(in.node());
  node->backward = std::forward<Backward>(backward);
  return Var<T, D>(std::move(node));
}

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::Node)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::Var)
