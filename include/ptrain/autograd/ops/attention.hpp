#pragma once
// Attention on any device: softmax under an additive mask, the masks attention uses, and
// scaled_dot_product_attention as torch.nn.functional's, composed of bmm (autograd/ops/linear.hpp),
// masked_softmax and dropout (autograd/ops/dropout.hpp), so its backward is theirs.
//
// Masks are additive, of type T: 0 where a query may attend to a key, -inf where it may not (the
// float masks PyTorch accepts; causal_mask is nn.Transformer.generate_square_subsequent_mask). A
// query row masked everywhere gets zero weights, as PyTorch's scaled_dot_product_attention has done
// since 2.5 (its `_safe_softmax`), not softmax's NaN; its gradient is zero too. Boolean masks become
// additive through additive_mask (true: attend) and key_padding_mask (true: padding).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/dropout.hpp"
#include "ptrain/autograd/ops/linear.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/softmax.hpp"

namespace ptrain {

// softmax(x + mask) over the last dimension, mask broadcast to x's shape (no gradient flows to
// it); a row with every position at -inf gives zeros.
template <class T, Device D>
Var<T, D> masked_softmax(const Var<T, D>& x, const Tensor<T, D>& mask) {
  check(x.shape().rank() >= 1, "masked_softmax: input of shape ", x.shape(), " has no last dimension");
  check(mask.defined(), "masked_softmax: undefined mask (use softmax)");
  const std::int64_t n = x.size(x.shape().rank() - 1), rows = n == 0 ? 0 : x.numel() / n;
  const kernels::BroadcastIndex mask_at(mask.shape(), x.shape(), "masked_softmax");
  Tensor<T, D> y(x.shape());
  kernels::masked_softmax_forward(kernels::executor_for<D>{}, x.value().data(), mask.data(), mask_at, y.data(), rows,
                                  n);
  const kernels::ReductionLayout layout{rows, n, 1};
  return make_var<T, D>(y, {x}, "masked_softmax", [y, layout](Node<T, D>& self) {
    Tensor<T, D> gx(y.shape());
    kernels::softmax_backward(kernels::executor_for<D>{}, y.data(), self.grad.data(), gx.data(), layout, false);
    self.inputs[0]->accumulate(std::move(gx));
  });
}

// [queries, keys]: 0 where key <= query, -inf above the diagonal (a query sees itself and the past).
template <class T, Device D = Cpu>
Tensor<T, D> causal_mask(std::int64_t queries, std::int64_t keys) {
  check(queries >= 0 && keys >= 0, "causal_mask: negative size ", queries, " x ", keys);
  Tensor<T> mask({queries, keys});
  for (std::int64_t q = 0; q < queries; ++q)
    for (std::int64_t k = 0; k < keys; ++k)
      mask[q * keys + k] = k <= q ? T(0) : static_cast<T>(-std::numeric_limits<float>::infinity());
  return on_device<D>(mask);
}

// The additive form of a boolean mask of the given shape, row-major: 0 where `attend` is true,
// -inf where it is false (torch's scaled_dot_product_attention reads a boolean attn_mask so).
template <class T, Device D = Cpu>
Tensor<T, D> additive_mask(const std::vector<bool>& attend, const Shape& shape) {
  check(static_cast<std::int64_t>(attend.size()) == shape.numel(), "additive_mask: ", attend.size(),
        " flags for shape ", shape);
  Tensor<T> mask(shape);
  for (std::size_t i = 0; i < attend.size(); ++i)
    mask[static_cast<std::int64_t>(i)] = attend[i] ? T(0) : static_cast<T>(-std::numeric_limits<float>::infinity());
  return on_device<D>(mask);
}

// [batch, 1, 1, keys] from nn.MultiheadAttention's boolean key_padding_mask [batch, keys] (true:
// padding, not attended to), row-major: broadcasts against scores [batch, heads, queries, keys].
template <class T, Device D = Cpu>
Tensor<T, D> key_padding_mask(const std::vector<bool>& padded, std::int64_t batch, std::int64_t keys) {
  check(batch >= 0 && keys >= 0 && static_cast<std::int64_t>(padded.size()) == batch * keys, "key_padding_mask: ",
        padded.size(), " flags for ", batch, " x ", keys);
  std::vector<bool> attend(padded.size());
  for (std::size_t i = 0; i < padded.size(); ++i) attend[i] = !padded[i];
  return additive_mask<T, D>(attend, Shape{batch, 1, 1, keys});
}

// a + b broadcast (both additive masks; either may be undefined).
template <class T, Device D>
Tensor<T, D> combine_masks(const Tensor<T, D>& a, const Tensor<T, D>& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  const Shape shape = kernels::broadcast_shapes(a.shape(), b.shape(), "combine_masks");
  Tensor<T, D> out(shape);
  const kernels::BroadcastIndex at_a(a.shape(), shape, "combine_masks"), at_b(b.shape(), shape, "combine_masks");
  kernels::broadcast_map2(kernels::executor_for<D>{}, a.data(), at_a, b.data(), at_b, out.data(), out.numel(),
                          kernels::Add{});
  return out;
}

// The options of scaled_dot_product_attention beyond q, k and v, as torch's keywords.
template <class T, Device D>
struct AttentionOptions {
  Tensor<T, D> attn_mask;          // additive, broadcast to [batch..., queries, keys]; undefined: none
  double dropout_p = 0.0;          // on the attention weights (pass 0 in evaluation, as torch)
  bool is_causal = false;          // adds causal_mask(queries, keys)
  std::optional<double> scale;     // default 1 / sqrt(head dim)
  Rng* rng = nullptr;              // the dropout's generator; null: global_rng()
};

// softmax(q k^T * scale + mask) v with dropout on the weights: q [batch..., L, E], k [batch..., S, E],
// v [batch..., S, Ev] -> [batch..., L, Ev], the batch extents equal.
template <class T, Device D>
Var<T, D> scaled_dot_product_attention(const Var<T, D>& q, const Var<T, D>& k, const Var<T, D>& v,
                                       const AttentionOptions<T, D>& options = {}) {
  const int rank = q.shape().rank();
  check(rank >= 3 && k.shape().rank() == rank && v.shape().rank() == rank, "scaled_dot_product_attention: q ",
        q.shape(), ", k ", k.shape(), ", v ", v.shape(), " (expected [batch..., length, features], the same rank)");
  check(k.size(rank - 2) == v.size(rank - 2), "scaled_dot_product_attention: ", k.size(rank - 2), " keys but ",
        v.size(rank - 2), " values");
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(rank - 1))));
  Var<T, D> scores = ptrain::scale(bmm(q, k, false, true), static_cast<T>(scale));
  Tensor<T, D> mask = options.attn_mask;
  if (options.is_causal) mask = combine_masks(mask, causal_mask<T, D>(q.size(rank - 2), k.size(rank - 2)));
  Var<T, D> weights = mask.defined() ? masked_softmax(scores, mask) : softmax(scores, -1);
  if (options.dropout_p > 0.0)
    weights = dropout(weights, options.dropout_p, true, options.rng ? *options.rng : global_rng());
  return bmm(weights, v);
}

}  // namespace ptrain
