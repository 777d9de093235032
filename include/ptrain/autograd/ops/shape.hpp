#pragma once
// Shape ops on any device: reshape and flatten (views that share the input's storage), permute and
// transpose (contiguous copies) and concat (torch.cat; its row copies through kernels/elementwise.hpp).
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "ptrain/autograd/detail/dim.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"

namespace ptrain {

namespace detail {
template <class T, Device D>
Var<T, D> reshape_view(const Var<T, D>& x, Tensor<T, D> y, const char* op) {
  const Shape in_shape = x.shape();
  return make_var<T, D>(std::move(y), {x}, op, [in_shape](Node<T, D>& self) {
    // A view of this node's gradient, handed on as shared: the input copies it before
    // accumulating into it.
    self.inputs[0]->accumulate(self.grad.reshape(in_shape), false);
  });
}
}  // namespace detail

// The same elements with another shape (same count); the result shares x's storage.
template <class T, Device D>
Var<T, D> reshape(const Var<T, D>& x, const Shape& shape) {
  return detail::reshape_view(x, x.value().reshape(shape), "reshape");
}
// As above, with at most one extent -1 inferred from the others: reshape(x, {n, -1}).
template <class T, Device D>
Var<T, D> reshape(const Var<T, D>& x, std::initializer_list<std::int64_t> extents) {
  return detail::reshape_view(x, x.value().reshape(extents), "reshape");
}

// Dimensions start_dim..last merged into one, as torch.flatten(x, start_dim) (end_dim = -1):
// [N, C, H, W] -> [N, C*H*W] for the default start_dim = 1. A view, like reshape.
template <class T, Device D>
Var<T, D> flatten(const Var<T, D>& x, int start_dim = 1) {
  const Shape& in = x.shape();
  if (in.rank() == 0) {
    check(start_dim == 0 || start_dim == -1, "flatten: dimension ", start_dim,
          " is out of range for a scalar (expected 0 or -1)");
    return detail::reshape_view(x, x.value().reshape(Shape{1}), "flatten");
  }
  const int start = detail::wrap_dim(start_dim, in, "flatten");
  Shape out;
  for (int i = 0; i < start; ++i) out.push_back(in[i]);
  std::int64_t merged = 1;
  for (int i = start; i < in.rank(); ++i) merged *= in[i];
  out.push_back(merged);
  return detail::reshape_view(x, x.value().reshape(out), "flatten");
}

namespace detail {
// dims checked to be a permutation of x's dimensions (negative ones count from the back).
inline std::vector<int> permutation(const Shape& x, std::span<const int> dims, const char* op) {
  check(static_cast<int>(dims.size()) == x.rank(), op, ": ", dims.size(), " dimensions given for shape ", x);
  std::vector<int> out;
  std::vector<bool> seen(static_cast<std::size_t>(x.rank()), false);
  for (int d : dims) {
    const int w = wrap_dim(d, x, op);
    check(!seen[static_cast<std::size_t>(w)], op, ": dimension ", d, " appears twice for shape ", x);
    seen[static_cast<std::size_t>(w)] = true;
    out.push_back(w);
  }
  return out;
}
}  // namespace detail

// x with its dimensions reordered, as torch.permute(x, dims) followed by .contiguous(): dimension
// d of the result is dimension dims[d] of x. Backward permutes the gradient back.
template <class T, Device D>
Var<T, D> permute(const Var<T, D>& x, std::span<const int> dims) {
  const auto perm = detail::permutation(x.shape(), dims, "permute");
  Shape out_shape;
  std::vector<int> inverse(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) {
    out_shape.push_back(x.size(perm[d]));
    inverse[static_cast<std::size_t>(perm[d])] = static_cast<int>(d);
  }
  Tensor<T, D> y(out_shape);
  kernels::permute(kernels::executor_for<D>{}, x.value().data(), kernels::PermuteIndex(x.shape(), perm), y.data(),
                   y.numel());
  const kernels::PermuteIndex back(out_shape, inverse);
  return make_var<T, D>(std::move(y), {x}, "permute", [back](Node<T, D>& self) {
    Tensor<T, D> gx(self.inputs[0]->value.shape());
    kernels::permute(kernels::executor_for<D>{}, self.grad.data(), back, gx.data(), gx.numel());
    self.inputs[0]->accumulate(std::move(gx));
  });
}
template <class T, Device D>
Var<T, D> permute(const Var<T, D>& x, std::initializer_list<int> dims) {
  return permute(x, std::span<const int>(dims.begin(), dims.size()));
}

// x with dimensions d0 and d1 swapped, as torch.transpose(x, d0, d1).contiguous().
template <class T, Device D>
Var<T, D> transpose(const Var<T, D>& x, int d0, int d1) {
  std::vector<int> dims(static_cast<std::size_t>(x.shape().rank()));
  for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
  std::swap(dims[static_cast<std::size_t>(detail::wrap_dim(d0, x.shape(), "transpose"))],
            dims[static_cast<std::size_t>(detail::wrap_dim(d1, x.shape(), "transpose"))]);
  return permute(x, std::span<const int>(dims));
}

// The inputs joined along dim, as torch.cat: all have the same rank and the same extents
// except along dim (the channel concat of Inception and UNet is dim = 1).
template <class T, Device D = Cpu>
Var<T, D> concat(const std::vector<Var<T, D>>& xs, int dim) {
  check(!xs.empty(), "concat: no inputs");
  for (std::size_t i = 0; i < xs.size(); ++i) check(xs[i].defined(), "concat: input ", i, " is undefined");
  const Shape& first = xs[0].shape();
  check(first.rank() > 0, "concat: cannot join scalars (input 0 has shape [])");
  const int d = detail::wrap_dim(dim, first, "concat");
  Shape out_shape = first;
  out_shape[d] = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Shape& s = xs[i].shape();
    bool fits = s.rank() == first.rank();
    for (int k = 0; fits && k < s.rank(); ++k) fits = k == d || s[k] == first[k];
    check(fits, "concat: input ", i, " has shape ", s, ", which does not match input 0's shape ", first,
          " outside dimension ", d);
    out_shape[d] += s[d];
  }
  std::int64_t outer = 1, inner = 1;
  for (int k = 0; k < d; ++k) outer *= first[k];
  for (int k = d + 1; k < first.rank(); ++k) inner *= first[k];

  // blocks[i]: input i's contiguous run per outer index; offsets[i]: where it starts in a row.
  std::vector<std::int64_t> blocks(xs.size()), offsets(xs.size());
  const std::int64_t row = out_shape[d] * inner;
  Tensor<T, D> y(out_shape);
  for (std::size_t i = 0, offset = 0; i < xs.size(); ++i) {
    blocks[i] = xs[i].size(d) * inner;
    offsets[i] = static_cast<std::int64_t>(offset);
    offset += static_cast<std::size_t>(blocks[i]);
    kernels::copy_rows(kernels::executor_for<D>{}, xs[i].value().data(), blocks[i], y.data() + offsets[i], row, outer,
                       blocks[i]);
  }
  return make_var<T, D>(std::move(y), xs, "concat", [blocks, offsets, outer, row](Node<T, D>& self) {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (!self.input_needs_grad(i)) continue;
      if (outer == 1) {
        // Along the first non-unit dimension each input's gradient is one contiguous run:
        // hand on a view instead of a copy.
        Tensor<T, D> flat = self.grad.reshape(Shape{row});
        self.inputs[i]->accumulate(
            flat.slice(offsets[i], offsets[i] + blocks[i]).reshape(self.inputs[i]->value.shape()), false);
        continue;
      }
      Tensor<T, D> gi(self.inputs[i]->value.shape());
      kernels::copy_rows(kernels::executor_for<D>{}, self.grad.data() + offsets[i], row, gi.data(), blocks[i], outer,
                         blocks[i]);
      self.inputs[i]->accumulate(std::move(gi));
    }
  });
}

// concat({a, b}, 1): the same, with the scalar type deduced from a braced list.
template <class T, Device D = Cpu>
Var<T, D> concat(std::initializer_list<Var<T, D>> xs, int dim) {
  return concat(std::vector<Var<T, D>>(xs), dim);
}

}  // namespace ptrain
