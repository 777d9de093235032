#pragma once
// What activation checkpointing's tests measure: the ops a graph keeps alive, and how far apart two
// runs' tensors are.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <unordered_set>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/variable.hpp>

namespace ptrain::test {

// The ops a backward pass would run from y: what the graph keeps alive.
inline std::size_t recorded_ops(const Var<double>& y) {
  std::unordered_set<const Node<double>*> seen;
  std::vector<const Node<double>*> todo{y.node().get()};
  std::size_t ops = 0;
  while (!todo.empty()) {
    const Node<double>* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second) continue;
    if (!n->is_leaf()) ++ops;
    for (const auto& in : n->inputs) todo.push_back(in.get());
  }
  return ops;
}

inline double max_abs_difference(const Tensor<double>& a, const Tensor<double>& b) {
  BOOST_REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace ptrain::test
