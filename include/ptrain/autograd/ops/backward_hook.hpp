#pragma once
// with_backward_hook(x, hook): x unchanged going forward (a view of its value); going back, hook()
// runs first, then the gradient passes on unchanged. Backward reaches this node once every consumer
// of x has passed its gradient on, and before any op that made x: the moment "the backward of what
// made x begins" (Sharded<Zero3> gathers a layer's parameters there, parallel/detail/parameter_shards.hpp).
#include <functional>
#include <utility>

#include "ptrain/autograd/variable.hpp"

namespace ptrain {

template <class T, class D>
Var<T, D> with_backward_hook(const Var<T, D>& x, std::function<void()> hook) {
  return make_var<T, D>(x.value(), {x}, "backward_hook", [hook = std::move(hook)](Node<T, D>& self) {
    hook();
    self.inputs[0]->accumulate(std::move(self.grad), self.grad_owned);
  });
}

}  // namespace ptrain
