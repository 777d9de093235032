#pragma once
// linear (y = x W^T + b) on a device other than Cpu (HostEmulated, Cuda): GEMMs and a bias add
// through executor_for<D>; backward by two GEMMs and the column sums of the gradient.
#include <utility>
#include <vector>

#include "ptrain/autograd/ops/linear.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"

namespace ptrain {

// x: [batch, in], weight: [out, in], bias: [out] or undefined.
template <class T, kernels::ExecutorDevice D>
Var<T, D> linear(const Var<T, D>& x, const Var<T, D>& weight, const Var<T, D>& bias = {}) {
  detail::check_linear_shapes(x, weight, bias);
  const auto batch = x.size(0), in = x.size(1), out = weight.size(0);
  const bool has_bias = bias.defined();
  const kernels::executor_for<D> ex;
  Tensor<T, D> y({batch, out});
  ex.template gemm<T>(false, true, batch, out, in, 1, x.value().data(), in, weight.value().data(), in, 0, y.data(),
                      out);
  if (has_bias) kernels::indexed::add_bias(ex, y.data(), bias.value().data(), batch, out, 1);
  std::vector<Var<T, D>> inputs{x, weight};
  if (has_bias) inputs.push_back(bias);
  return make_var<T, D>(std::move(y), std::move(inputs), "linear", [batch, in, out, has_bias](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const T* gy = self.grad.data();
    if (self.input_needs_grad(0)) {
      Tensor<T, D> gx({batch, in});
      ex.template gemm<T>(false, false, batch, in, out, 1, gy, out, self.inputs[1]->value.data(), in, 0, gx.data(),
                          in);
      self.inputs[0]->accumulate(std::move(gx));
    }
    if (self.input_needs_grad(1)) {
      Tensor<T, D> gw({out, in});
      ex.template gemm<T>(true, false, out, in, batch, 1, gy, out, self.inputs[0]->value.data(), in, 0, gw.data(),
                          in);
      self.inputs[1]->accumulate(std::move(gw));
    }
    if (has_bias && self.input_needs_grad(2)) {
      Tensor<T, D> gb({out});
      kernels::indexed::column_sums(ex, gy, batch, out, gb.data());
      self.inputs[2]->accumulate(std::move(gb));
    }
  });
}

}  // namespace ptrain
