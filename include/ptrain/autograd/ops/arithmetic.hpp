#pragma once
// Elementwise arithmetic on any device: add, sub, mul and div of two variables with numpy /
// PyTorch broadcasting (shapes aligned at their last dimension, extents equal or 1), and scale by
// a constant. The gradient of a broadcast operand is summed over the dimensions it was broadcast
// along. Same-shape add, the residual connection, keeps its fast path: one kernel forward, the
// incoming gradient shared by both inputs backward.
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ptrain/autograd/detail/elementwise.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/reduce.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

namespace detail {
// add's backward for equal shapes: both inputs receive the same gradient, shared until one of
// them writes to it.
template <class T, Device D>
void add_backward(Node<T, D>& self) {
  for (std::size_t i = 0; i < 2; ++i)
    if (self.input_needs_grad(i)) self.inputs[i]->accumulate(self.grad, false);
}

// y = forward(a, b) broadcast; backward gives operand k grads[k](g, a, b), summed back to its shape.
template <class T, Device D, class Forward, class GradA, class GradB>
Var<T, D> broadcast_binary(const Var<T, D>& a, const Var<T, D>& b, Forward forward, GradA grad_a, GradB grad_b,
                           const char* op) {
  const Shape out = kernels::broadcast_shapes(a.shape(), b.shape(), op);
  const kernels::BroadcastIndex at_a(a.shape(), out, op), at_b(b.shape(), out, op);
  Tensor<T, D> y(out);
  kernels::broadcast_map2(kernels::executor_for<D>{}, a.value().data(), at_a, b.value().data(), at_b, y.data(),
                          y.numel(), forward);
  return make_var<T, D>(std::move(y), {a, b}, op, [at_a, at_b, grad_a, grad_b, op](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const T* av = self.inputs[0]->value.data();
    const T* bv = self.inputs[1]->value.data();
    const auto operand_grad = [&](std::size_t k, auto grad) {
      if (!self.input_needs_grad(k)) return;
      Tensor<T, D> full(self.grad.shape());
      kernels::broadcast_map3(ex, self.grad.data(), av, at_a, bv, at_b, full.data(), full.numel(), grad);
      const Shape& shape = self.inputs[k]->value.shape();
      if (shape == full.shape()) return self.inputs[k]->accumulate(std::move(full));
      Tensor<T, D> folded(shape);
      kernels::sum_to(ex, full.data(), kernels::BroadcastFold(shape, full.shape(), op), folded.data(), folded.numel());
      self.inputs[k]->accumulate(std::move(folded));
    };
    operand_grad(0, grad_a);
    operand_grad(1, grad_b);
  });
}
}  // namespace detail

// a + b, broadcast.
template <class T, Device D>
Var<T, D> add(const Var<T, D>& a, const Var<T, D>& b) {
  if (a.shape() != b.shape())
    return detail::broadcast_binary(a, b, kernels::Add{}, kernels::GradPassThrough{}, kernels::GradPassThrough{},
                                    "add");
  Tensor<T, D> y(a.shape());
  kernels::map2(kernels::executor_for<D>{}, a.value().data(), b.value().data(), y.data(), y.numel(), kernels::Add{});
  return make_var<T, D>(std::move(y), {a, b}, "add", detail::add_backward<T, D>);
}

// a - b, broadcast.
template <class T, Device D>
Var<T, D> sub(const Var<T, D>& a, const Var<T, D>& b) {
  return detail::broadcast_binary(a, b, kernels::Sub{}, kernels::GradPassThrough{}, kernels::GradNegated{}, "sub");
}

// a * b elementwise, broadcast.
template <class T, Device D>
Var<T, D> mul(const Var<T, D>& a, const Var<T, D>& b) {
  return detail::broadcast_binary(a, b, kernels::Mul{}, kernels::MulGradA{}, kernels::MulGradB{}, "mul");
}

// a / b elementwise, broadcast.
template <class T, Device D>
Var<T, D> div(const Var<T, D>& a, const Var<T, D>& b) {
  return detail::broadcast_binary(a, b, kernels::Div{}, kernels::DivGradA{}, kernels::DivGradB{}, "div");
}

template <class T, Device D>
Var<T, D> operator+(const Var<T, D>& a, const Var<T, D>& b) {
  return add(a, b);
}
template <class T, Device D>
Var<T, D> operator-(const Var<T, D>& a, const Var<T, D>& b) {
  return sub(a, b);
}
template <class T, Device D>
Var<T, D> operator*(const Var<T, D>& a, const Var<T, D>& b) {
  return mul(a, b);
}
template <class T, Device D>
Var<T, D> operator/(const Var<T, D>& a, const Var<T, D>& b) {
  return div(a, b);
}

// factor * x.
template <class T, Device D>
Var<T, D> scale(const Var<T, D>& x, std::type_identity_t<T> factor) {
  const auto by = static_cast<double>(factor);
  return detail::diagonal_map(
      x, [by](const T* in, T* out, std::int64_t n) { kernels::scale(kernels::executor_for<D>{}, in, out, n, by); },
      "scale");
}

template <class T, Device D>
Var<T, D> operator*(const Var<T, D>& x, std::type_identity_t<T> factor) {
  return scale(x, factor);
}
template <class T, Device D>
Var<T, D> operator*(std::type_identity_t<T> factor, const Var<T, D>& x) {
  return scale(x, factor);
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::add)
PTRAIN_PREBUILT_OPS_FD(ptrain::sub)
PTRAIN_PREBUILT_OPS_FD(ptrain::mul)
PTRAIN_PREBUILT_OPS_FD(ptrain::div)
PTRAIN_PREBUILT_OPS_FD(ptrain::scale)
