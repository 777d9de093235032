#pragma once
// The backward pass: nodes in reverse topological order, each gradient freed once it has been
// passed on, leaf hooks fired the moment their last contribution arrives.
#include <unordered_map>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

namespace detail {
// Nodes reachable from root that need a gradient, inputs before the ops that consume them.
// The order owns its nodes: an intermediate nobody else holds (relu(linear(x, w))) must live
// until its own backward has run, although its consumer drops its inputs before that.
template <class T, class D>
std::vector<typename Node<T, D>::Ptr> topological_order(const typename Node<T, D>::Ptr& root,
                                                        std::unordered_map<Node<T, D>*, int>& consumers) {
  std::vector<typename Node<T, D>::Ptr> order;
  std::unordered_map<Node<T, D>*, bool> visited;
  std::vector<std::pair<typename Node<T, D>::Ptr, std::size_t>> stack{{root, 0}};
  visited[root.get()] = true;
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      typename Node<T, D>::Ptr in = node->inputs[next++];
      if (!in || !in->requires_grad) continue;
      ++consumers[in.get()];
      if (!visited[in.get()]) {
        visited[in.get()] = true;
        stack.emplace_back(std::move(in), 0);
      }
    } else {
      order.push_back(std::move(node));
      stack.pop_back();
    }
  }
  return order;
}
}  // namespace detail

// Backpropagate from root, seeded with grad_output (ones for a scalar when omitted).
// The graph is released as it is consumed unless retain_graph is set.
template <class T, class D>
void backward(const Var<T, D>& root, Tensor<T, D> grad_output = {}, bool retain_graph = false) {
  check(root.defined() && root.requires_grad(),
        "backward: the output does not require a gradient (no parameter took part, or it was computed under NoGradGuard)");
  if (!grad_output.defined()) {
    check(root.numel() == 1, "backward: an output of shape ", root.shape(),
          " needs an explicit gradient; only a scalar gets an implicit one");
    grad_output = Tensor<T, D>::ones(root.shape());
  }
  Node<T, D>* top = root.node().get();
  std::unordered_map<Node<T, D>*, int> consumers;
  auto order = detail::topological_order<T, D>(root.node(), consumers);
  NoGradGuard no_grad;
  auto finish_leaf = [](Node<T, D>* leaf) {
    if (leaf->grad.defined() && !leaf->grad_owned) {
      leaf->grad = leaf->grad.clone();
      leaf->grad_owned = true;
    }
    if (leaf->on_grad_ready) leaf->on_grad_ready(*leaf);
  };
  top->accumulate(std::move(grad_output), true);
  if (top->is_leaf()) finish_leaf(top);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node<T, D>* node = it->get();
    if (node->is_leaf()) continue;
    if (node->grad.defined()) node->backward(*node);
    for (auto& in : node->inputs)
      if (in && in->requires_grad && --consumers[in.get()] == 0 && in->is_leaf()) finish_leaf(in.get());
    // An op's gradient is spent once passed on; kept, a retained graph's second pass would add
    // the first pass's gradient again.
    node->grad = Tensor<T, D>();
    node->grad_owned = false;
    if (!retain_graph) {
      node->backward = nullptr;
      node->inputs.clear();
      node->requires_grad = false;
      it->reset();  // freed here unless the caller holds it
    }
  }
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::backward)
