#pragma once
// matmul, bmm (batched, either operand transposed) and linear (y = x W^T + b, as in
// torch.nn.functional.linear) on any device: the GEMMs are the executor's (the CPU GEMM, cuBLAS),
// half and bfloat16 multiplying and summing in float; the bias through kernels/linear.hpp, its
// gradient the column sums of kernels/reduce.hpp.
#include <cstdint>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/linear.hpp"
#include "ptrain/kernels/reduce.hpp"
#include "ptrain/core/prebuilt.hpp"

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
// bmm's operands: [batch..., rows, cols] each, the same leading extents.
struct BatchedProduct {
  std::int64_t batch, m, k, n;
  bool trans_a, trans_b;
  std::int64_t lda() const { return trans_a ? m : k; }  // row strides of the stored matrices
  std::int64_t ldb() const { return trans_b ? k : n; }
};
inline BatchedProduct batched_product(const Shape& a, const Shape& b, bool trans_a, bool trans_b) {
  const int rank = a.rank();
  check(rank >= 3 && b.rank() == rank, "bmm: operands ", a, " and ", b,
        " are not batches of matrices of the same rank (expected [batch..., rows, cols], rank 3 or more)");
  std::int64_t batch = 1;
  for (int d = 0; d < rank - 2; ++d) {
    check(a[d] == b[d], "bmm: batch extents of ", a, " and ", b, " differ at dimension ", d);
    batch *= a[d];
  }
  const std::int64_t m = trans_a ? a[rank - 1] : a[rank - 2], k = trans_a ? a[rank - 2] : a[rank - 1];
  const std::int64_t kb = trans_b ? b[rank - 1] : b[rank - 2], n = trans_b ? b[rank - 2] : b[rank - 1];
  check(k == kb, "bmm: ", a, (trans_a ? " transposed" : ""), " and ", b, (trans_b ? " transposed" : ""),
        " do not multiply (", k, " against ", kb, ")");
  return {batch, m, k, n, trans_a, trans_b};
}
}  // namespace detail

// op(a) op(b) for each matrix of a batch, op a transpose where asked: a [batch..., m, k] (or
// [batch..., k, m] with trans_a) and b [batch..., k, n] (or [batch..., n, k] with trans_b) give
// [batch..., m, n], as torch.matmul of two batches of the same leading shape. One GEMM per matrix.
template <class T, Device D>
Var<T, D> bmm(const Var<T, D>& a, const Var<T, D>& b, bool trans_a = false, bool trans_b = false) {
  const auto p = detail::batched_product(a.shape(), b.shape(), trans_a, trans_b);
  Shape out_shape = a.shape();
  out_shape[out_shape.rank() - 2] = p.m;
  out_shape[out_shape.rank() - 1] = p.n;
  Tensor<T, D> y(out_shape);
  const kernels::executor_for<D> ex;
  for (std::int64_t i = 0; i < p.batch; ++i)
    ex.template gemm<T>(trans_a, trans_b, p.m, p.n, p.k, 1, a.value().data() + i * p.m * p.k, p.lda(),
                        b.value().data() + i * p.k * p.n, p.ldb(), 0, y.data() + i * p.m * p.n, p.n);
  return make_var<T, D>(std::move(y), {a, b}, "bmm", [p](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const T* gy = self.grad.data();
    const T* a = self.inputs[0]->value.data();
    const T* b = self.inputs[1]->value.data();
    const std::int64_t sa = p.m * p.k, sb = p.k * p.n, sy = p.m * p.n;
    if (self.input_needs_grad(0)) {
      Tensor<T, D> ga(self.inputs[0]->value.shape());
      for (std::int64_t i = 0; i < p.batch; ++i) {
        if (p.trans_a)  // stored [k, m]: op(b) gy^T
          ex.template gemm<T>(p.trans_b, true, p.k, p.m, p.n, 1, b + i * sb, p.ldb(), gy + i * sy, p.n, 0,
                              ga.data() + i * sa, p.m);
        else  // gy op(b)^T
          ex.template gemm<T>(false, !p.trans_b, p.m, p.k, p.n, 1, gy + i * sy, p.n, b + i * sb, p.ldb(), 0,
                              ga.data() + i * sa, p.k);
      }
      self.inputs[0]->accumulate(std::move(ga));
    }
    if (self.input_needs_grad(1)) {
      Tensor<T, D> gb(self.inputs[1]->value.shape());
      for (std::int64_t i = 0; i < p.batch; ++i) {
        if (p.trans_b)  // stored [n, k]: gy^T op(a)
          ex.template gemm<T>(true, p.trans_a, p.n, p.k, p.m, 1, gy + i * sy, p.n, a + i * sa, p.lda(), 0,
                              gb.data() + i * sb, p.k);
        else  // op(a)^T gy
          ex.template gemm<T>(!p.trans_a, false, p.k, p.n, p.m, 1, a + i * sa, p.lda(), gy + i * sy, p.n, 0,
                              gb.data() + i * sb, p.n);
      }
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

PTRAIN_PREBUILT_OPS_FD(ptrain::matmul)
PTRAIN_PREBUILT_OPS_FD(ptrain::bmm)
PTRAIN_PREBUILT_OPS_FD(ptrain::linear)
