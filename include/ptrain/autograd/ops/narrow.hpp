#pragma once
// narrow(x, dim, start, length): the extents [start, start + length) of x along dim, as
// torch.narrow, on any device. The result is a copy (the rows of a narrowed dimension are not
// contiguous); backward writes the gradient into those extents of a zero gradient for x.
#include <cstdint>

#include "ptrain/autograd/detail/dim.hpp"
#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

template <class T, class D>
Var<T, D> narrow(const Var<T, D>& x, int dim, std::int64_t start, std::int64_t length) {
  check(x.defined(), "narrow: the input is undefined");
  const Shape& in = x.shape();
  check(in.rank() > 0, "narrow: cannot narrow a scalar (shape [])");
  const int d = detail::wrap_dim(dim, in, "narrow");
  check(start >= 0 && length >= 0 && start + length <= in[d], "narrow: extents [", start, ", ", start + length,
        ") of dimension ", d, " are outside the input of shape ", in, " (expected 0 <= start <= start + length <= ",
        in[d], ")");
  std::int64_t outer = 1, inner = 1;
  for (int k = 0; k < d; ++k) outer *= in[k];
  for (int k = d + 1; k < in.rank(); ++k) inner *= in[k];
  // Per outer index: the input's row holds in[d] * inner elements, the kept block length * inner.
  const std::int64_t row = in[d] * inner, block = length * inner, offset = start * inner;
  Shape out = in;
  out[d] = length;
  Tensor<T, D> y(out);
  if (y.numel() > 0) kernels::copy_rows(kernels::executor_for<D>{}, x.value().data() + offset, row, y.data(), block, outer, block);
  return make_var<T, D>(std::move(y), {x}, "narrow", [outer, row, block, offset](Node<T, D>& self) {
    Tensor<T, D> gx = Tensor<T, D>::zeros(self.inputs[0]->value.shape());
    if (block > 0) kernels::copy_rows(kernels::executor_for<D>{}, self.grad.data(), block, gx.data() + offset, row, outer, block);
    self.inputs[0]->accumulate(std::move(gx));
  });
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::narrow)
