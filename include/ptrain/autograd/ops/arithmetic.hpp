#pragma once
// Elementwise arithmetic on variables: add (same shapes; the residual connection) and scale
// by a constant (loss weighting, averaging).
#include <type_traits>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/functors.hpp"

namespace ptrain {

namespace detail {
inline void check_add_shapes(const Shape& a, const Shape& b) {
  check(a == b, "add: shapes ", a, " and ", b, " differ (add does not broadcast; expected equal shapes)");
}

// add's backward on any device: both inputs receive the same gradient, shared until one of them
// writes to it.
template <class T, class D>
void add_backward(Node<T, D>& self) {
  for (std::size_t i = 0; i < 2; ++i)
    if (self.input_needs_grad(i)) self.inputs[i]->accumulate(self.grad, false);
}
}  // namespace detail

// a + b for tensors of the same shape (no broadcasting).
template <class T>
Var<T> add(const Var<T>& a, const Var<T>& b) {
  detail::check_add_shapes(a.shape(), b.shape());
  Tensor<T> y = kernels::map2(a.value(), b.value(), kernels::Add{});
  return make_var<T>(std::move(y), {a, b}, "add", detail::add_backward<T, Cpu>);
}

template <class T>
Var<T> operator+(const Var<T>& a, const Var<T>& b) {
  return add(a, b);
}

// factor * x.
template <class T>
Var<T> scale(const Var<T>& x, std::type_identity_t<T> factor) {
  Tensor<T> y(x.shape());
  y.array() = x.value().array() * factor;
  return make_var<T>(std::move(y), {x}, "scale", [factor](Node<T>& self) {
    Tensor<T> gx(self.grad.shape());
    gx.array() = self.grad.array() * factor;
    self.inputs[0]->accumulate(std::move(gx));
  });
}

template <class T>
Var<T> operator*(const Var<T>& x, std::type_identity_t<T> factor) {
  return scale(x, factor);
}
template <class T>
Var<T> operator*(std::type_identity_t<T> factor, const Var<T>& x) {
  return scale(x, factor);
}

}  // namespace ptrain
