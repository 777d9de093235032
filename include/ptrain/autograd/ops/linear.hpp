#pragma once
// matmul and linear (y = x W^T + b), as in torch.nn.functional.linear. half and bfloat16 multiply
// and sum in float (see kernels/cpu/gemm.hpp).
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"

namespace ptrain {

// [m, k] x [k, n] -> [m, n]
template <class T>
Var<T> matmul(const Var<T>& a, const Var<T>& b) {
  check(a.shape().rank() == 2 && b.shape().rank() == 2 && a.size(1) == b.size(0), "matmul: shapes ",
        a.shape(), " and ", b.shape(), " do not multiply");
  const auto m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor<T> y({m, n});
  kernels::gemm<T>(false, false, m, n, k, T(1), a.value().data(), k, b.value().data(), n, T(0), y.data(), n);
  return make_var<T>(std::move(y), {a, b}, "matmul", [m, k, n](Node<T>& self) {
    const T* gy = self.grad.data();
    const auto& A = self.inputs[0]->value;
    const auto& B = self.inputs[1]->value;
    if (self.input_needs_grad(0)) {
      Tensor<T> ga({m, k});
      kernels::gemm<T>(false, true, m, k, n, T(1), gy, n, B.data(), n, T(0), ga.data(), k);
      self.inputs[0]->accumulate(std::move(ga));
    }
    if (self.input_needs_grad(1)) {
      Tensor<T> gb({k, n});
      kernels::gemm<T>(true, false, k, n, m, T(1), A.data(), k, gy, n, T(0), gb.data(), n);
      self.inputs[1]->accumulate(std::move(gb));
    }
  });
}

namespace detail {
// linear's shapes, checked (on every device): x [batch, in], weight [out, in], bias [out] or none.
template <class V>
void check_linear_shapes(const V& x, const V& weight, const V& bias) {
  check(x.shape().rank() == 2 && weight.shape().rank() == 2 && x.size(1) == weight.size(1), "linear: input ",
        x.shape(), " does not fit weight ", weight.shape());
  if (bias.defined())
    check(bias.shape() == Shape{weight.size(0)}, "linear: bias ", bias.shape(), " for ", weight.size(0), " outputs");
}
}  // namespace detail

// x: [batch, in], weight: [out, in], bias: [out] or undefined.
template <class T>
Var<T> linear(const Var<T>& x, const Var<T>& weight, const Var<T>& bias = {}) {
  detail::check_linear_shapes(x, weight, bias);
  const auto batch = x.size(0), in = x.size(1), out = weight.size(0);
  const bool has_bias = bias.defined();
  Tensor<T> y({batch, out});
  if (has_bias) {
    const T* b = bias.value().data();
    for (std::int64_t r = 0; r < batch; ++r) std::copy(b, b + out, y.data() + r * out);
  }
  kernels::gemm<T>(false, true, batch, out, in, T(1), x.value().data(), in, weight.value().data(), in,
                   has_bias ? T(1) : T(0), y.data(), out);
  std::vector<Var<T>> inputs{x, weight};
  if (has_bias) inputs.push_back(bias);
  return make_var<T>(std::move(y), std::move(inputs), "linear", [batch, in, out, has_bias](Node<T>& self) {
    const T* gy = self.grad.data();
    if (self.input_needs_grad(0)) {
      Tensor<T> gx({batch, in});
      kernels::gemm<T>(false, false, batch, in, out, T(1), gy, out, self.inputs[1]->value.data(), in, T(0),
                       gx.data(), in);
      self.inputs[0]->accumulate(std::move(gx));
    }
    if (self.input_needs_grad(1)) {
      Tensor<T> gw({out, in});
      kernels::gemm<T>(true, false, out, in, batch, T(1), gy, out, self.inputs[0]->value.data(), in, T(0),
                       gw.data(), in);
      self.inputs[1]->accumulate(std::move(gw));
    }
    if (has_bias && self.input_needs_grad(2)) {
      Tensor<T> gb({out});
      gb.array() = self.grad.matrix(batch)
                       .template cast<accumulate_t<T>>()
                       .colwise()
                       .sum()
                       .transpose()
                       .array()
                       .template cast<T>();
      self.inputs[2]->accumulate(std::move(gb));
    }
  });
}

}  // namespace ptrain
