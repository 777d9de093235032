#pragma once
// Attention on any device: softmax under an additive mask, the masks attention uses, and
// scaled_dot_product_attention as torch.nn.functional's, composed of bmm (autograd/ops/linear.hpp),
// masked_softmax and dropout (autograd/ops/dropout.hpp), so its backward is theirs; and
// packed_heads_attention, the same over the heads of packed [L, N, E] projections in place.
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
#include "ptrain/core/prebuilt.hpp"

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

namespace detail {
// softmax(scores + mask) with dropout on the weights, as options say (the scale already applied).
template <class T, Device D>
Var<T, D> attention_weights(const Var<T, D>& scores, std::int64_t queries, std::int64_t keys,
                            const AttentionOptions<T, D>& options) {
  Tensor<T, D> mask = options.attn_mask;
  if (options.is_causal) mask = combine_masks(mask, causal_mask<T, D>(queries, keys));
  Var<T, D> weights = mask.defined() ? masked_softmax(scores, mask) : softmax(scores, -1);
  if (options.dropout_p > 0.0)
    weights = dropout(weights, options.dropout_p, true, options.rng ? *options.rng : global_rng());
  return weights;
}
}  // namespace detail

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
  const Var<T, D> scores = ptrain::scale(bmm(q, k, false, true), static_cast<T>(scale));
  return bmm(detail::attention_weights(scores, q.size(rank - 2), k.size(rank - 2), options), v);
}

namespace detail {
// The heads of a packed projection, [length, batch, E] (or batch_first [batch, length, E]) with
// E = heads x head_dim: head h of sequence n is the [length, head_dim] matrix at offset(n * heads + h)
// with row stride ld(), so a GEMM reads and writes it in place (no permute to [batch, heads, ...]).
struct PackedHeads {
  std::int64_t batch, heads, length, head_dim;
  bool batch_first;
  std::int64_t embed() const { return heads * head_dim; }
  std::int64_t ld() const { return batch_first ? embed() : batch * embed(); }
  std::int64_t offset(std::int64_t matrix) const {
    const std::int64_t n = matrix / heads, h = matrix % heads;
    return (batch_first ? n * length * embed() : n * embed()) + h * head_dim;
  }
  Shape shape() const { return batch_first ? Shape{batch, length, embed()} : Shape{length, batch, embed()}; }
};

inline PackedHeads packed_heads(const Shape& x, std::int64_t heads, bool batch_first, const char* what) {
  check(x.rank() == 3 && heads > 0 && x[2] % heads == 0, "packed_heads_attention: ", what, " of shape ", x,
        " (expected ", batch_first ? "[N, length, E]" : "[length, N, E]", " with E a multiple of ", heads,
        " heads)");
  return {batch_first ? x[0] : x[1], heads, batch_first ? x[1] : x[0], x[2] / heads, batch_first};
}

// scores [N, heads, L, S] = scale * q_h k_h^T for each head of q and k.
template <class T, Device D>
Var<T, D> packed_head_scores(const Var<T, D>& q, const Var<T, D>& k, const PackedHeads& qh, const PackedHeads& kh,
                             T scale) {
  const std::int64_t matrices = qh.batch * qh.heads, l = qh.length, s = kh.length, hd = qh.head_dim;
  Tensor<T, D> y({qh.batch, qh.heads, l, s});
  const kernels::executor_for<D> ex;
  for (std::int64_t i = 0; i < matrices; ++i)
    ex.template gemm<T>(false, true, l, s, hd, scale, q.value().data() + qh.offset(i), qh.ld(),
                        k.value().data() + kh.offset(i), kh.ld(), 0, y.data() + i * l * s, s);
  return make_var<T, D>(std::move(y), {q, k}, "packed_head_scores", [qh, kh, scale](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const std::int64_t matrices = qh.batch * qh.heads, l = qh.length, s = kh.length, hd = qh.head_dim;
    const T* gy = self.grad.data();
    if (self.input_needs_grad(0)) {  // gq_h = scale * gy_h k_h
      Tensor<T, D> gq(qh.shape());
      for (std::int64_t i = 0; i < matrices; ++i)
        ex.template gemm<T>(false, false, l, hd, s, scale, gy + i * l * s, s, self.inputs[1]->value.data() + kh.offset(i),
                            kh.ld(), 0, gq.data() + qh.offset(i), qh.ld());
      self.inputs[0]->accumulate(std::move(gq));
    }
    if (self.input_needs_grad(1)) {  // gk_h = scale * gy_h^T q_h
      Tensor<T, D> gk(kh.shape());
      for (std::int64_t i = 0; i < matrices; ++i)
        ex.template gemm<T>(true, false, s, hd, l, scale, gy + i * l * s, s, self.inputs[0]->value.data() + qh.offset(i),
                            qh.ld(), 0, gk.data() + kh.offset(i), kh.ld());
      self.inputs[1]->accumulate(std::move(gk));
    }
  });
}

// The packed output [L, N, E] (or [N, L, E]) whose head h is weights_h v_h: weights [N, heads, L, S].
template <class T, Device D>
Var<T, D> packed_head_outputs(const Var<T, D>& weights, const Var<T, D>& v, const PackedHeads& oh,
                              const PackedHeads& vh) {
  const std::int64_t matrices = oh.batch * oh.heads, l = oh.length, s = vh.length, hd = oh.head_dim;
  Tensor<T, D> y(oh.shape());
  const kernels::executor_for<D> ex;
  for (std::int64_t i = 0; i < matrices; ++i)
    ex.template gemm<T>(false, false, l, hd, s, 1, weights.value().data() + i * l * s, s, v.value().data() + vh.offset(i),
                        vh.ld(), 0, y.data() + oh.offset(i), oh.ld());
  return make_var<T, D>(std::move(y), {weights, v}, "packed_head_outputs", [oh, vh](Node<T, D>& self) {
    const kernels::executor_for<D> ex;
    const std::int64_t matrices = oh.batch * oh.heads, l = oh.length, s = vh.length, hd = oh.head_dim;
    const T* gy = self.grad.data();
    if (self.input_needs_grad(0)) {  // gw_h = gy_h v_h^T
      Tensor<T, D> gw(self.inputs[0]->value.shape());
      for (std::int64_t i = 0; i < matrices; ++i)
        ex.template gemm<T>(false, true, l, s, hd, 1, gy + oh.offset(i), oh.ld(), self.inputs[1]->value.data() + vh.offset(i),
                            vh.ld(), 0, gw.data() + i * l * s, s);
      self.inputs[0]->accumulate(std::move(gw));
    }
    if (self.input_needs_grad(1)) {  // gv_h = w_h^T gy_h
      Tensor<T, D> gv(vh.shape());
      for (std::int64_t i = 0; i < matrices; ++i)
        ex.template gemm<T>(true, false, s, hd, l, 1, self.inputs[0]->value.data() + i * l * s, s, gy + oh.offset(i),
                            oh.ld(), 0, gv.data() + vh.offset(i), vh.ld());
      self.inputs[1]->accumulate(std::move(gv));
    }
  });
}
}  // namespace detail

// Multi-head attention over packed projections, as nn.MultiheadAttention computes it between its
// input and output projections: q [L, N, E], k [S, N, E], v [S, N, E] (batch_first: [N, L, E], ...),
// E = heads x head_dim, each head attending over its own head_dim columns -> [L, N, E] (or
// [N, L, E]). The same as scaled_dot_product_attention on the heads permuted to [N, heads, L, hd]
// and the result permuted back, without the permutes: each head's GEMMs read and write it in place.
// options.attn_mask broadcasts against the scores [N, heads, L, S]; the scale defaults to
// 1 / sqrt(head_dim).
template <class T, Device D>
Var<T, D> packed_heads_attention(const Var<T, D>& q, const Var<T, D>& k, const Var<T, D>& v, std::int64_t heads,
                                 bool batch_first, const AttentionOptions<T, D>& options = {}) {
  const detail::PackedHeads qh = detail::packed_heads(q.shape(), heads, batch_first, "query");
  const detail::PackedHeads kh = detail::packed_heads(k.shape(), heads, batch_first, "key");
  check(k.shape() == v.shape() && kh.batch == qh.batch && kh.head_dim == qh.head_dim,
        "packed_heads_attention: query ", q.shape(), ", key ", k.shape(), ", value ", v.shape(),
        " (expected the same batch and E, key and value of one shape)");
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(qh.head_dim)));
  const Var<T, D> scores = detail::packed_head_scores(q, k, qh, kh, static_cast<T>(scale));
  return detail::packed_head_outputs(detail::attention_weights(scores, qh.length, kh.length, options), v, qh, kh);
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::masked_softmax)
PTRAIN_PREBUILT_OPS_FD(ptrain::scaled_dot_product_attention)
PTRAIN_PREBUILT_OPS_FD(ptrain::packed_heads_attention)
