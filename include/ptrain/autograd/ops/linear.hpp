#pragma once
// matmul and linear (y = x W^T + b) on any device, as in torch.nn.functional.linear: the GEMMs are
// the executor's (the CPU GEMM, cuBLAS), half and bfloat16 multiplying and summing in float; the
// bias through kernels/linear.hpp, its gradient the column sums of kernels/reduce.hpp.
#include <cstdint>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/linear.hpp"
#include "ptrain/kernels/reduce.hpp"

namespace ptrain {

// [m, k] x [k, n] -> [m, n]
template <class T, Device D>
Var<T, D> matmul(const Var<T, D>& a, const Var<T, D>& b) {
  check(a.shape().rank() == 2 && b.shape().rank() == 2 && a.size(1) == b.size(0), "matmul: shapes ", a.shape(), " and ",
        b.shape(), " do not multiply");
  const auto m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor<T, D> y({m, n});
  kernels::executor_for<D>{}.template gemm<T>(false, false, m, n, k, 1, a.value().data(), k, b.value().data(), n, 0,
                                              y.data(), n);
  return make_var<T, D>(std::move(y), {a, b}, "matmul", [m, k, n](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const T* gy = self.grad.data();
    if (self.input_needs_grad(0)) {
      Tensor<T, D> ga({m, k});
      ex.template gemm<T>(false, true, m, k, n, 1, gy, n, self.inputs[1]->value.data(), n, 0, ga.data(), k);
      self.inputs[0]->accumulate(std::move(ga));
    }
    if (self.input_needs_grad(1)) {
      Tensor<T, D> gb({k, n});
      ex.template gemm<T>(true, false, k, n, m, 1, self.inputs[0]->value.data(), k, gy, n, 0, gb.data(), n);
      self.inputs[1]->accumulate(std::move(gb));
    }
  });
}

namespace detail {
// linear's shapes, checked: x [batch, in], weight [out, in], bias [out] or none.
template <class V>
void check_linear_shapes(const V& x, const V& weight, const V& bias) {
  check(x.shape().rank() == 2 && weight.shape().rank() == 2 && x.size(1) == weight.size(1), "linear: input ", x.shape(),
        " does not fit weight ", weight.shape());
  if (bias.defined())
    check(bias.shape() == Shape{weight.size(0)}, "linear: bias ", bias.shape(), " for ", weight.size(0), " outputs");
}
}  // namespace detail

// x: [batch, in], weight: [out, in], bias: [out] or undefined.
template <class T, Device D>
Var<T, D> linear(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias = {}) {
  detail::check_linear_shapes(x, weight, bias);
  const auto batch = x.size(0), in = x.size(1), out = weight.size(0);
  const bool has_bias = bias.defined();
  Tensor<T, D> y({batch, out});
  kernels::linear_forward(kernels::executor_for<D>{}, batch, in, out, x.value().data(), weight.value().data(),
                          has_bias ? bias.value().data() : nullptr, y.data());
  std::vector<Var<T, D>> inputs{x, weight};
  if (has_bias) inputs.push_back(bias);
  return make_var<T, D>(std::move(y), std::move(inputs), "linear", [batch, in, out, has_bias](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const T* gy = self.grad.data();
    if (self.input_needs_grad(0)) {
      Tensor<T, D> gx({batch, in});
      ex.template gemm<T>(false, false, batch, in, out, 1, gy, out, self.inputs[1]->value.data(), in, 0, gx.data(), in);
      self.inputs[0]->accumulate(std::move(gx));
    }
    if (self.input_needs_grad(1)) {
      Tensor<T, D> gw({out, in});
      ex.template gemm<T>(true, false, out, in, batch, 1, gy, out, self.inputs[0]->value.data(), in, 0, gw.data(), in);
      self.inputs[1]->accumulate(std::move(gw));
    }
    if (has_bias && self.input_needs_grad(2)) {
      Tensor<T, D> gb({out});
      kernels::column_sums(ex, gy, batch, out, gb.data());
      self.inputs[2]->accumulate(std::move(gb));
    }
  });
}

}  // namespace ptrain
