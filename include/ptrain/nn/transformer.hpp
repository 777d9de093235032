#pragma once
// The transformer encoder's modules with PyTorch's parameter names, so a state_dict PyTorch wrote
// loads as it is:
//   MultiheadAttention       in_proj_weight [3E, E], in_proj_bias [3E], out_proj.{weight,bias};
//                            sequence-first [L, N, E] or batch_first [N, L, E]
//   TransformerEncoderLayer  self_attn.*, linear1.*, linear2.*, norm1.*, norm2.*; post-norm as
//                            PyTorch's default or norm_first; relu or gelu
//   TransformerEncoder       layers.N.* (and norm.* when given a final norm)
//   PositionalEncoding       the sinusoidal table of PyTorch's tutorial, buffer pe [max_len, 1, E]
// Masks are additive (autograd/ops/attention.hpp): AttentionMasks holds nn.MultiheadAttention's
// attn_mask and key_padding_mask in that form, and is_causal. forward(x) alone attends everywhere.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/attention.hpp"
#include "ptrain/autograd/ops/narrow.hpp"
#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/layer_norm.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

// nn.MultiheadAttention's masks, additive: attn_mask [L, S] or [N * heads, L, S];
// key_padding_mask [N, S] (or [N, 1, 1, S], as key_padding_mask() makes it); undefined: none.
template <class T, class D = Cpu>
struct AttentionMasks {
  Tensor<T, D> attn_mask;
  Tensor<T, D> key_padding_mask;
  bool is_causal = false;
};

template <class T = float, class D = Cpu>
class MultiheadAttention : public Module<T, D> {
 public:
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false, Rng* rng = nullptr)
      : embed_dim_(embed_dim), heads_(num_heads), dropout_(dropout), batch_first_(batch_first), rng_(rng) {
    check(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, "MultiheadAttention(", embed_dim, ", ",
          num_heads, "): embed_dim must be a positive multiple of num_heads");
    detail::check_dropout_probability(dropout);
    Tensor<T> w({3 * embed_dim, embed_dim});
    init::xavier_uniform(w);
    in_proj_weight = this->register_parameter("in_proj_weight", w);
    if (bias) in_proj_bias = this->register_parameter("in_proj_bias", Tensor<T>::zeros({3 * embed_dim}));
    out_proj = this->register_module("out_proj", std::make_shared<Linear<T, D>>(embed_dim, embed_dim, bias));
    if (bias) out_proj->bias.value().copy_from(Tensor<T, D>::zeros({embed_dim}));
  }

  // Self-attention without masks.
  Var<T, D> forward(const Var<T, D>& x) override { return forward(x, x, x); }

  // The attention output (not the weights: need_weights=False), shaped as query.
  Var<T, D> forward(const Var<T, D>& query, const Var<T, D>& key, const Var<T, D>& value,
                    const AttentionMasks<T, D>& masks = {}) {
    check(query.shape().rank() == 3 && key.shape().rank() == 3 && value.shape().rank() == 3 &&
              query.size(2) == embed_dim_ && key.shape() == value.shape() && key.size(2) == embed_dim_,
          "MultiheadAttention: query ", query.shape(), ", key ", key.shape(), ", value ", value.shape(),
          " (expected ", batch_first_ ? "[N, L, E]" : "[L, N, E]", " with E = ", embed_dim_, ")");
    const int batch_dim = batch_first_ ? 0 : 1;
    check(key.size(batch_dim) == query.size(batch_dim), "MultiheadAttention: query batch ", query.size(batch_dim),
          " and key batch ", key.size(batch_dim), " differ");
    const std::int64_t n = query.size(batch_dim), l = query.size(1 - batch_dim), s = key.size(1 - batch_dim);
    AttentionOptions<T, D> options;
    options.attn_mask = scores_mask(masks, n, l, s);
    options.is_causal = masks.is_causal;
    options.dropout_p = this->is_training() ? dropout_ : 0.0;
    options.rng = rng_;
    const auto q = project(query, 0), k = project(key, 1), v = project(value, 2);
    return (*out_proj)(packed_heads_attention(q, k, v, heads_, batch_first_, options));
  }

  Var<T, D> in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear<T, D>> out_proj;

 private:
  // x's rows through part `which` (q, k, v) of the packed input projection.
  Var<T, D> project(const Var<T, D>& x, int which) {
    const auto w = narrow(in_proj_weight, 0, which * embed_dim_, embed_dim_);
    const auto b = in_proj_bias.defined() ? narrow(in_proj_bias, 0, which * embed_dim_, embed_dim_) : Var<T, D>();
    return reshape(linear(reshape(x, {-1, embed_dim_}), w, b), x.shape());
  }
  // The masks as one additive tensor broadcasting against scores [N, heads, L, S].
  Tensor<T, D> scores_mask(const AttentionMasks<T, D>& masks, std::int64_t n, std::int64_t l, std::int64_t s) const {
    Tensor<T, D> attn = masks.attn_mask;
    if (attn.defined()) {
      check(attn.shape() == Shape{l, s} || attn.shape() == Shape{n * heads_, l, s}, "MultiheadAttention: attn_mask ",
            attn.shape(), " (expected [", l, ", ", s, "] or [", n * heads_, ", ", l, ", ", s, "])");
      if (attn.rank() == 3) attn = attn.reshape(Shape{n, heads_, l, s});
    }
    Tensor<T, D> padding = masks.key_padding_mask;
    if (padding.defined()) {
      check(padding.numel() == n * s && (padding.rank() == 2 || padding.rank() == 4),
            "MultiheadAttention: key_padding_mask ", padding.shape(), " (expected [", n, ", ", s, "])");
      padding = padding.reshape(Shape{n, 1, 1, s});
    }
    return combine_masks(attn, padding);
  }

  std::int64_t embed_dim_, heads_;
  double dropout_;
  bool batch_first_;
  Rng* rng_;
};

enum class Activation { relu, gelu };

// nn.TransformerEncoderLayer's arguments, its defaults.
struct TransformerEncoderLayerOptions {
  std::int64_t d_model = 512;
  std::int64_t nhead = 8;
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  Activation activation = Activation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
  // forward(x) attends causally (the mask made from x's length there, as is_causal): the layer then
  // needs nothing but x, so a pipeline can cut a stack of them anywhere.
  bool causal = false;
};

template <class T = float, class D = Cpu>
class TransformerEncoderLayer : public Module<T, D> {
 public:
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& o, Rng* rng = nullptr)
      : options_(o) {
    self_attn = this->register_module(
        "self_attn", std::make_shared<MultiheadAttention<T, D>>(o.d_model, o.nhead, o.dropout, o.bias, o.batch_first,
                                                                rng));
    linear1 = this->register_module("linear1", std::make_shared<Linear<T, D>>(o.d_model, o.dim_feedforward, o.bias));
    dropout = this->register_module("dropout", std::make_shared<Dropout<T, D>>(o.dropout, rng));
    linear2 = this->register_module("linear2", std::make_shared<Linear<T, D>>(o.dim_feedforward, o.d_model, o.bias));
    norm1 = this->register_module("norm1",
                                  std::make_shared<LayerNorm<T, D>>(Shape{o.d_model}, o.layer_norm_eps, true, o.bias));
    norm2 = this->register_module("norm2",
                                  std::make_shared<LayerNorm<T, D>>(Shape{o.d_model}, o.layer_norm_eps, true, o.bias));
    dropout1 = this->register_module("dropout1", std::make_shared<Dropout<T, D>>(o.dropout, rng));
    dropout2 = this->register_module("dropout2", std::make_shared<Dropout<T, D>>(o.dropout, rng));
  }

  Var<T, D> forward(const Var<T, D>& x) override {
    AttentionMasks<T, D> masks;
    masks.is_causal = options_.causal;
    return forward(x, masks);
  }

  // PyTorch's order: post-norm x = norm1(x + sa(x)); x = norm2(x + ff(x)); norm_first
  // x = x + sa(norm1(x)); x = x + ff(norm2(x)).
  Var<T, D> forward(const Var<T, D>& x, const AttentionMasks<T, D>& masks) {
    if (options_.norm_first) {
      Var<T, D> h = x + self_attention_block((*norm1)(x), masks);
      return h + feed_forward_block((*norm2)(h));
    }
    Var<T, D> h = (*norm1)(x + self_attention_block(x, masks));
    return (*norm2)(h + feed_forward_block(h));
  }

  std::shared_ptr<MultiheadAttention<T, D>> self_attn;
  std::shared_ptr<Linear<T, D>> linear1, linear2;
  std::shared_ptr<LayerNorm<T, D>> norm1, norm2;
  std::shared_ptr<Dropout<T, D>> dropout, dropout1, dropout2;

 private:
  Var<T, D> self_attention_block(const Var<T, D>& x, const AttentionMasks<T, D>& masks) {
    return (*dropout1)(self_attn->forward(x, x, x, masks));
  }
  Var<T, D> feed_forward_block(const Var<T, D>& x) {
    Var<T, D> h = (*linear1)(x);
    h = options_.activation == Activation::gelu ? gelu(h) : relu(h);
    return (*dropout2)((*linear2)((*dropout)(h)));
  }

  TransformerEncoderLayerOptions options_;
};

// nn.TransformerEncoder: num_layers layers built from the same options (PyTorch deep-copies one
// layer, so they start equal there; here each draws its own weights), then an optional final norm.
template <class T = float, class D = Cpu>
class TransformerEncoder : public Module<T, D> {
 public:
  TransformerEncoder(const TransformerEncoderLayerOptions& o, std::int64_t num_layers, bool final_norm = false,
                     Rng* rng = nullptr) {
    check(num_layers > 0, "TransformerEncoder: ", num_layers, " layers (expected at least one)");
    auto list = this->register_module("layers", std::make_shared<Sequential<T, D>>());
    for (std::int64_t i = 0; i < num_layers; ++i) {
      layers.push_back(std::make_shared<TransformerEncoderLayer<T, D>>(o, rng));
      list->push_back(layers.back());
    }
    if (final_norm)
      norm = this->register_module("norm", std::make_shared<LayerNorm<T, D>>(Shape{o.d_model}, o.layer_norm_eps));
  }

  // Each layer as its options say (causal or not).
  Var<T, D> forward(const Var<T, D>& x) override {
    Var<T, D> h = x;
    for (auto& layer : layers) h = (*layer)(h);
    return norm ? (*norm)(h) : h;
  }
  Var<T, D> forward(const Var<T, D>& x, const AttentionMasks<T, D>& masks) {
    Var<T, D> h = x;
    for (auto& layer : layers) h = layer->forward(h, masks);
    return norm ? (*norm)(h) : h;
  }

  std::vector<std::shared_ptr<TransformerEncoderLayer<T, D>>> layers;
  std::shared_ptr<LayerNorm<T, D>> norm;
};

// The tutorial's PositionalEncoding: x [S, N, E] + pe[:S] (pe[p, 0, 2i] = sin(p / 10000^(2i/E)),
// pe[p, 0, 2i+1] = the cos), then dropout; batch_first: x [N, S, E]. pe is a buffer, saved in the
// state_dict as PyTorch's is.
template <class T = float, class D = Cpu>
class PositionalEncoding : public Module<T, D> {
 public:
  PositionalEncoding(std::int64_t d_model, double dropout = 0.1, std::int64_t max_len = 5000, Rng* rng = nullptr,
                     bool batch_first = false)
      : d_model_(d_model), batch_first_(batch_first) {
    check(d_model > 0 && max_len > 0, "PositionalEncoding(", d_model, ", max_len ", max_len,
          "): sizes must be positive");
    Tensor<T> pe = Tensor<T>::zeros({max_len, 1, d_model});
    for (std::int64_t p = 0; p < max_len; ++p)
      for (std::int64_t i = 0; i < d_model; i += 2) {
        // as the tutorial: div_term = exp(2i * (-log(10000) / E)), the factor rounded to float
        const float div = std::exp(static_cast<float>(i) * static_cast<float>(-std::log(10000.0) / d_model));
        const float angle = static_cast<float>(p) * div;
        pe[p * d_model + i] = static_cast<T>(std::sin(angle));
        if (i + 1 < d_model) pe[p * d_model + i + 1] = static_cast<T>(std::cos(angle));
      }
    pe_ = this->register_buffer("pe", pe);
    dropout_ = this->register_module("dropout", std::make_shared<Dropout<T, D>>(dropout, rng));
  }

  Var<T, D> forward(const Var<T, D>& x) override {
    const int sequence_dim = batch_first_ ? 1 : 0;
    check(x.shape().rank() == 3 && x.size(2) == d_model_ && x.size(sequence_dim) <= pe_.size(0),
          "PositionalEncoding: input ", x.shape(), " (expected ", batch_first_ ? "[N, S, " : "[S, N, ", d_model_,
          "] with S at most ", pe_.size(0), ")");
    const std::int64_t s = x.size(sequence_dim);
    Tensor<T, D> pe = pe_.slice(0, s);
    if (batch_first_) pe = pe.reshape(Shape{1, s, d_model_});
    return (*dropout_)(x + Var<T, D>(pe));
  }

 private:
  std::int64_t d_model_;
  bool batch_first_;
  Tensor<T, D> pe_;
  std::shared_ptr<Dropout<T, D>> dropout_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::MultiheadAttention)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::TransformerEncoderLayer)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::TransformerEncoder)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::PositionalEncoding)
