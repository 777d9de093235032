#pragma once
// Reductions of a whole tensor to a scalar (shape []): sum and mean.
#include "ptrain/autograd/variable.hpp"

namespace ptrain {

namespace detail {
inline void check_mean_input(const Shape& x) {
  check(x.numel() > 0, "mean: the input of shape ", x, " has no elements");
}

template <class T>
Var<T> reduce_all(const Var<T>& x, double factor, const char* op) {
  // Summed in double: a float sum over millions of elements would lose digits.
  const double total = x.value().array().template cast<double>().sum();
  Tensor<T> y = Tensor<T>::full(Shape{}, static_cast<T>(total * factor));
  return make_var<T>(std::move(y), {x}, op, [factor](Node<T>& self) {
    const Tensor<T>& x_value = self.inputs[0]->value;
    self.inputs[0]->accumulate(Tensor<T>::full(x_value.shape(), static_cast<T>(self.grad[0] * factor)));
  });
}
}  // namespace detail

// The sum of all elements, as a scalar of shape [].
template <class T>
Var<T> sum(const Var<T>& x) {
  return detail::reduce_all(x, 1.0, "sum");
}

// The mean of all elements, as a scalar of shape []; an empty tensor is an error.
template <class T>
Var<T> mean(const Var<T>& x) {
  detail::check_mean_input(x.shape());
  return detail::reduce_all(x, 1.0 / static_cast<double>(x.numel()), "mean");
}

}  // namespace ptrain
