#pragma once
// ALBERT (Lan et al., 2019) as HuggingFace transformers' AlbertModel and AlbertForPreTraining, with
// its parameter names, so its safetensors files load and ours load there:
//   albert.embeddings.{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm}.*
//   albert.encoder.embedding_hidden_mapping_in.*           the factorised embedding E -> H
//   albert.encoder.albert_layer_groups.0.albert_layers.0.{full_layer_layer_norm,attention.{query,
//       key,value,dense,LayerNorm},ffn,ffn_output}.*       one layer, applied num_hidden_layers times
//   albert.pooler.*                                        tanh(Linear) of the first position
//   predictions.{bias,dense,LayerNorm}.*                   the MLM head; its decoder is the word
//       embedding (predictions.decoder.weight, a tied name) plus predictions.bias
//       (predictions.decoder.bias, another)
//   sop_classifier.classifier.*                            sentence-order prediction
// GELU is HF's gelu_new (the tanh form), LayerNorm's eps 1e-12, weights drawn as HF's
// _init_weights (N(0, 0.02), biases 0, the padding row 0). The shared layer is one set of
// parameters used num_hidden_layers times, so its gradient is the sum over the applications.
//
// The one-tensor form the Trainer and a pipeline pass (inputs and outputs of T):
//   inputs  [N, 3, S]: input_ids, token_type_ids and attention_mask (1 attend, 0 padding) as whole
//           numbers (albert_inputs() packs them)
//   output  [N, S * V + 2]: the MLM logits of each position, then the two SOP logits
//           (AlbertPreTraining in tasks/albert_pretraining.hpp reads it)
// forward_heads() gives the two heads apart.
//
// AlbertForPreTrainingSequential is the same model as a Sequential, so a Pipeline can cut it
// between any two of its top-level layers: the embeddings, embedding_hidden_mapping_in, the one
// shared layer once per application, the pooler, the MLM head and the SOP head, under the same
// names and in the same order, so either loads the other's files. Where the cut puts the shared
// layer's applications (or the word embedding and the MLM decoder tied to it) on several stages,
// each stage holds a copy and the Pipeline sums the copies' gradients before the step.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/attention.hpp"
#include "ptrain/autograd/ops/embedding.hpp"
#include "ptrain/autograd/ops/linear.hpp"
#include "ptrain/autograd/ops/narrow.hpp"
#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/nn/embedding.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/layer_norm.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

// transformers.AlbertConfig's fields that this model reads, under its names; the defaults are
// albert-base-v2's.
struct AlbertConfig {
  std::int64_t vocab_size = 30000;
  std::int64_t embedding_size = 128;
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;
  std::int64_t pad_token_id = 0;
  double hidden_dropout_prob = 0.0;
  double attention_probs_dropout_prob = 0.0;
  double classifier_dropout_prob = 0.1;
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;

  // albert-base-v2: E 128, H 768, 12 layers, 12 heads, FFN 3072, vocabulary 30,000.
  static AlbertConfig base() { return {}; }
  // A configuration a CPU trains in minutes: E 64, H 128, 4 layers, 4 heads, FFN 512, 128
  // positions.
  static AlbertConfig small(std::int64_t vocab_size) {
    return {.vocab_size = vocab_size, .embedding_size = 64, .hidden_size = 128, .num_hidden_layers = 4,
            .num_attention_heads = 4, .intermediate_size = 512, .max_position_embeddings = 128};
  }
};

// The host tensor [N, 3, S] of the one-tensor form from input_ids, token_type_ids and
// attention_mask, each [N, S] row-major (an empty token_type_ids: all 0; an empty attention_mask:
// all 1).
template <class T = float>
Tensor<T> albert_inputs(std::span<const std::int64_t> input_ids, std::span<const std::int64_t> token_type_ids,
                        std::span<const std::int64_t> attention_mask, std::int64_t batch, std::int64_t length) {
  const auto n = static_cast<std::size_t>(batch * length);
  check(batch > 0 && length > 0 && input_ids.size() == n && (token_type_ids.empty() || token_type_ids.size() == n) &&
            (attention_mask.empty() || attention_mask.size() == n),
        "albert_inputs: ", input_ids.size(), " input_ids, ", token_type_ids.size(), " token_type_ids and ",
        attention_mask.size(), " attention_mask values for [", batch, ", ", length, "]");
  Tensor<T> out({batch, 3, length});
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t s = 0; s < length; ++s) {
      const auto i = static_cast<std::size_t>(b * length + s);
      out[(b * 3 + 0) * length + s] = static_cast<T>(input_ids[i]);
      out[(b * 3 + 1) * length + s] = static_cast<T>(token_type_ids.empty() ? 0 : token_type_ids[i]);
      out[(b * 3 + 2) * length + s] = static_cast<T>(attention_mask.empty() ? 1 : attention_mask[i]);
    }
  return out;
}

namespace detail {

// Linear layers N(0, initializer_range) with zero biases, as HF's _init_weights.
template <class T, class D>
void init_albert_linear(Linear<T, D>& layer, const AlbertConfig& c) {
  init::on_host(layer.weight.value(), [&](Tensor<T>& w) { init::normal(w, 0.0, c.initializer_range); });
  layer.bias.value().copy_from(Tensor<T, D>::zeros(layer.bias.shape()));
}
template <class T, class D>
std::shared_ptr<Linear<T, D>> albert_linear(std::int64_t in, std::int64_t out, const AlbertConfig& c) {
  auto layer = std::make_shared<Linear<T, D>>(in, out);
  init_albert_linear(*layer, c);
  return layer;
}

// The sizes a model of T can be built with: positive, and token ids exact in T.
template <class T>
void check_albert_sizes(const AlbertConfig& c, const char* model) {
  check(c.vocab_size >= 1 && c.embedding_size >= 1 && c.max_position_embeddings >= 1 && c.type_vocab_size >= 1, model,
        ": vocab_size ", c.vocab_size, ", embedding_size ", c.embedding_size, ", max_position_embeddings ",
        c.max_position_embeddings, ", type_vocab_size ", c.type_vocab_size, " (expected positive sizes)");
  const double exact = max_exact_whole_number<T>();
  check(static_cast<double>(c.vocab_size) <= exact, model, ": token ids up to ", c.vocab_size - 1,
        " are not whole numbers of this T (exact up to ", exact, "); build the model in float or double");
}

// The one-tensor inputs read on the host: ids, token types, and the additive key-padding mask.
template <class T, class D>
struct AlbertBatch {
  std::int64_t batch = 0, length = 0;
  std::vector<std::int64_t> input_ids, token_type_ids;
  Tensor<T, D> padding;  // [N, 1, 1, S], -inf at padded keys; undefined when nothing is padded
};

template <class T, class D>
AlbertBatch<T, D> read_albert_inputs(const Tensor<T, D>& inputs, const AlbertConfig& c) {
  check(inputs.rank() == 3 && inputs.size(1) == 3 && inputs.size(2) >= 1, "ALBERT: inputs of shape ", inputs.shape(),
        " (expected [N, 3, S]: input_ids, token_type_ids, attention_mask; see albert_inputs)");
  AlbertBatch<T, D> out;
  out.batch = inputs.size(0);
  out.length = inputs.size(2);
  check(out.length <= c.max_position_embeddings, "ALBERT: sequences of ", out.length,
        " tokens, longer than max_position_embeddings ", c.max_position_embeddings);
  const auto values = whole_numbers(inputs, "ALBERT inputs");
  std::vector<bool> padded;
  bool any_padding = false;
  for (std::int64_t b = 0; b < out.batch; ++b)
    for (std::int64_t row = 0; row < 3; ++row)
      for (std::int64_t s = 0; s < out.length; ++s) {
        const std::int64_t v = values[static_cast<std::size_t>((b * 3 + row) * out.length + s)];
        if (row == 0) out.input_ids.push_back(v);
        if (row == 1) {
          check(v >= 0 && v < c.type_vocab_size, "ALBERT: token_type_id ", v, " of sequence ", b, " at position ", s,
                " (expected 0 to ", c.type_vocab_size - 1, ")");
          out.token_type_ids.push_back(v);
        }
        if (row == 2) {
          check(v == 0 || v == 1, "ALBERT: attention_mask ", v, " of sequence ", b, " at position ", s,
                " (expected 1 to attend, 0 for padding)");
          padded.push_back(v == 0);
          any_padding = any_padding || v == 0;
        }
      }
  if (any_padding) out.padding = key_padding_mask<T, D>(padded, out.batch, out.length);
  return out;
}

}  // namespace detail

// Word, position and token-type embeddings summed, LayerNorm, dropout: [N, S] -> [N, S, E].
template <class T = float, class D = Cpu>
class AlbertEmbeddings : public Module<T, D> {
 public:
  AlbertEmbeddings(const AlbertConfig& c, Rng* rng = nullptr) : config_(c) {
    word_embeddings = embedding_table(c.vocab_size, c, c.pad_token_id);
    this->register_module("word_embeddings", word_embeddings);
    position_embeddings = this->register_module("position_embeddings",
                                                embedding_table(c.max_position_embeddings, c, std::nullopt));
    token_type_embeddings = this->register_module("token_type_embeddings",
                                                  embedding_table(c.type_vocab_size, c, std::nullopt));
    LayerNorm = this->register_module("LayerNorm",
                                      std::make_shared<ptrain::LayerNorm<T, D>>(Shape{c.embedding_size}, c.layer_norm_eps));
    dropout = this->register_module("dropout", std::make_shared<Dropout<T, D>>(c.hidden_dropout_prob, rng));
  }

  Var<T, D> forward(const Var<T, D>& inputs) override {
    return forward(detail::read_albert_inputs(inputs.value(), config_));
  }
  Var<T, D> forward(const detail::AlbertBatch<T, D>& in) {
    const Shape ids_shape{in.batch, in.length};
    std::vector<std::int64_t> positions(static_cast<std::size_t>(in.length));
    std::iota(positions.begin(), positions.end(), std::int64_t{0});
    Var<T, D> h = embedding(std::span<const std::int64_t>(in.input_ids), ids_shape, word_embeddings->weight,
                            config_.pad_token_id);
    h = h + embedding(std::span<const std::int64_t>(in.token_type_ids), ids_shape, token_type_embeddings->weight);
    h = h + embedding(std::span<const std::int64_t>(positions), Shape{in.length}, position_embeddings->weight);
    return (*dropout)((*LayerNorm)(h));
  }

  const AlbertConfig& config() const { return config_; }

  std::shared_ptr<Embedding<T, D>> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<ptrain::LayerNorm<T, D>> LayerNorm;
  std::shared_ptr<Dropout<T, D>> dropout;

 private:
  static std::shared_ptr<Embedding<T, D>> embedding_table(std::int64_t rows, const AlbertConfig& c,
                                                         std::optional<std::int64_t> padding_idx) {
    auto table = std::make_shared<Embedding<T, D>>(rows, c.embedding_size, padding_idx);
    init::on_host(table->weight.value(), [&](Tensor<T>& w) {
      init::normal(w, 0.0, c.initializer_range);
      if (padding_idx)
        for (std::int64_t e = 0; e < c.embedding_size; ++e) w[*padding_idx * c.embedding_size + e] = T(0);
    });
    return table;
  }
  AlbertConfig config_;
};

// Self-attention with the residual and LayerNorm after it (AlbertAttention): [N, S, H] -> [N, S, H].
template <class T = float, class D = Cpu>
class AlbertAttention : public Module<T, D> {
 public:
  AlbertAttention(const AlbertConfig& c, Rng* rng = nullptr)
      : heads_(c.num_attention_heads), attention_dropout_(c.attention_probs_dropout_prob), rng_(rng) {
    check(c.hidden_size > 0 && c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0,
          "AlbertAttention: hidden_size ", c.hidden_size, " is not a positive multiple of num_attention_heads ",
          c.num_attention_heads);
    detail::check_dropout_probability(c.attention_probs_dropout_prob);
    query = this->register_module("query", detail::albert_linear<T, D>(c.hidden_size, c.hidden_size, c));
    key = this->register_module("key", detail::albert_linear<T, D>(c.hidden_size, c.hidden_size, c));
    value = this->register_module("value", detail::albert_linear<T, D>(c.hidden_size, c.hidden_size, c));
    output_dropout = this->register_module("output_dropout",
                                           std::make_shared<Dropout<T, D>>(c.hidden_dropout_prob, rng));
    dense = this->register_module("dense", detail::albert_linear<T, D>(c.hidden_size, c.hidden_size, c));
    LayerNorm = this->register_module("LayerNorm",
                                      std::make_shared<ptrain::LayerNorm<T, D>>(Shape{c.hidden_size}, c.layer_norm_eps));
  }

  Var<T, D> forward(const Var<T, D>& h) override { return forward(h, Tensor<T, D>()); }
  // padding: additive [N, 1, 1, S] (key_padding_mask), or undefined.
  Var<T, D> forward(const Var<T, D>& h, const Tensor<T, D>& padding) {
    check(h.shape().rank() == 3, "AlbertAttention: hidden states of shape ", h.shape(), " (expected [N, S, H])");
    AttentionOptions<T, D> options;
    options.attn_mask = padding;
    options.dropout_p = this->is_training() ? attention_dropout_ : 0.0;
    options.rng = rng_;
    const auto q = (*query)(h), k = (*key)(h), v = (*value)(h);
    const auto context = packed_heads_attention(q, k, v, heads_, true, options);  // [N, S, H]
    return (*LayerNorm)(h + (*output_dropout)((*dense)(context)));
  }

  std::shared_ptr<Linear<T, D>> query, key, value, dense;
  std::shared_ptr<Dropout<T, D>> output_dropout;
  std::shared_ptr<ptrain::LayerNorm<T, D>> LayerNorm;

 private:
  std::int64_t heads_;
  double attention_dropout_;
  Rng* rng_;
};

// AlbertLayer: attention, then full_layer_layer_norm(ffn_output(gelu_new(ffn(a))) + a).
template <class T = float, class D = Cpu>
class AlbertLayer : public Module<T, D> {
 public:
  AlbertLayer(const AlbertConfig& c, Rng* rng = nullptr) {
    full_layer_layer_norm = this->register_module(
        "full_layer_layer_norm", std::make_shared<LayerNorm<T, D>>(Shape{c.hidden_size}, c.layer_norm_eps));
    attention = this->register_module("attention", std::make_shared<AlbertAttention<T, D>>(c, rng));
    ffn = this->register_module("ffn", detail::albert_linear<T, D>(c.hidden_size, c.intermediate_size, c));
    ffn_output = this->register_module("ffn_output", detail::albert_linear<T, D>(c.intermediate_size, c.hidden_size, c));
  }

  Var<T, D> forward(const Var<T, D>& h) override { return forward(h, Tensor<T, D>()); }
  Var<T, D> forward(const Var<T, D>& h, const Tensor<T, D>& padding) {
    const Var<T, D> a = attention->forward(h, padding);
    return (*full_layer_layer_norm)((*ffn_output)(gelu((*ffn)(a), true)) + a);
  }

  std::shared_ptr<LayerNorm<T, D>> full_layer_layer_norm;
  std::shared_ptr<AlbertAttention<T, D>> attention;
  std::shared_ptr<Linear<T, D>> ffn, ffn_output;
};

// AlbertTransformer: embedding_hidden_mapping_in (E -> H), then the one layer of the one group
// num_hidden_layers times (HF's num_hidden_groups = inner_group_num = 1).
template <class T = float, class D = Cpu>
class AlbertTransformer : public Module<T, D> {
 public:
  AlbertTransformer(const AlbertConfig& c, Rng* rng = nullptr) : layers_(c.num_hidden_layers) {
    check(c.num_hidden_layers >= 1, "AlbertTransformer: ", c.num_hidden_layers,
          " hidden layers (expected at least one)");
    embedding_hidden_mapping_in = this->register_module(
        "embedding_hidden_mapping_in", detail::albert_linear<T, D>(c.embedding_size, c.hidden_size, c));
    shared_layer = this->register_module("albert_layer_groups.0.albert_layers.0",
                                         std::make_shared<AlbertLayer<T, D>>(c, rng));
  }

  Var<T, D> forward(const Var<T, D>& e) override { return forward(e, Tensor<T, D>()); }
  Var<T, D> forward(const Var<T, D>& e, const Tensor<T, D>& padding) {
    Var<T, D> h = (*embedding_hidden_mapping_in)(e);
    for (std::int64_t i = 0; i < layers_; ++i) h = shared_layer->forward(h, padding);
    return h;
  }

  std::shared_ptr<Linear<T, D>> embedding_hidden_mapping_in;
  std::shared_ptr<AlbertLayer<T, D>> shared_layer;  // albert_layer_groups.0.albert_layers.0

 private:
  std::int64_t layers_;
};

template <class T, class D>
struct AlbertHidden {
  Var<T, D> sequence;  // last_hidden_state [N, S, H]
  Var<T, D> pooled;    // pooler_output [N, H]: tanh(pooler(sequence[:, 0]))
};

// AlbertModel: embeddings, encoder, pooler. forward(inputs [N, 3, S]) -> last_hidden_state.
template <class T = float, class D = Cpu>
class AlbertModel : public Module<T, D> {
 public:
  // rng: the dropout's generator (global_rng() when null).
  explicit AlbertModel(const AlbertConfig& c, Rng* rng = nullptr) : config_(c) {
    detail::check_albert_sizes<T>(c, "AlbertModel");
    embeddings = this->register_module("embeddings", std::make_shared<AlbertEmbeddings<T, D>>(c, rng));
    encoder = this->register_module("encoder", std::make_shared<AlbertTransformer<T, D>>(c, rng));
    pooler = this->register_module("pooler", detail::albert_linear<T, D>(c.hidden_size, c.hidden_size, c));
  }

  Var<T, D> forward(const Var<T, D>& inputs) override { return hidden(inputs).sequence; }
  AlbertHidden<T, D> hidden(const Var<T, D>& inputs) {
    const auto batch = detail::read_albert_inputs(inputs.value(), config_);
    AlbertHidden<T, D> out;
    out.sequence = encoder->forward(embeddings->forward(batch), batch.padding);
    const Var<T, D> first = reshape(narrow(out.sequence, 1, 0, 1), {batch.batch, config_.hidden_size});
    out.pooled = tanh((*pooler)(first));
    return out;
  }

  const AlbertConfig& config() const { return config_; }

  std::shared_ptr<AlbertEmbeddings<T, D>> embeddings;
  std::shared_ptr<AlbertTransformer<T, D>> encoder;
  std::shared_ptr<Linear<T, D>> pooler;

 private:
  AlbertConfig config_;
};

// AlbertMLMHead: dense (H -> E), gelu_new, LayerNorm, then the decoder, whose weight is the word
// embedding table (tied) and whose bias is `bias`.
template <class T = float, class D = Cpu>
class AlbertMLMHead : public Module<T, D> {
 public:
  AlbertMLMHead(const AlbertConfig& c, Var<T, D> decoder_weight) : decoder_weight_(std::move(decoder_weight)) {
    LayerNorm = this->register_module("LayerNorm",
                                      std::make_shared<ptrain::LayerNorm<T, D>>(Shape{c.embedding_size}, c.layer_norm_eps));
    bias = this->register_parameter("bias", Tensor<T>::zeros({c.vocab_size}));
    dense = this->register_module("dense", detail::albert_linear<T, D>(c.hidden_size, c.embedding_size, c));
  }

  // [N, S, H] -> [N, S, V]
  Var<T, D> forward(const Var<T, D>& h) override {
    const Var<T, D> e = (*LayerNorm)(gelu((*dense)(h), true));
    const Shape& s = e.shape();
    Shape out = s;
    out[s.rank() - 1] = decoder_weight_.size(0);
    return reshape(linear(reshape(e, {-1, s[s.rank() - 1]}), decoder_weight_, bias), out);
  }

  std::shared_ptr<ptrain::LayerNorm<T, D>> LayerNorm;
  Var<T, D> bias;
  std::shared_ptr<Linear<T, D>> dense;

 private:
  Var<T, D> decoder_weight_;
};

// AlbertSOPHead: dropout, classifier (H -> 2).
template <class T = float, class D = Cpu>
class AlbertSOPHead : public Module<T, D> {
 public:
  AlbertSOPHead(const AlbertConfig& c, Rng* rng = nullptr) {
    dropout = this->register_module("dropout", std::make_shared<Dropout<T, D>>(c.classifier_dropout_prob, rng));
    classifier = this->register_module("classifier", detail::albert_linear<T, D>(c.hidden_size, 2, c));
  }
  Var<T, D> forward(const Var<T, D>& pooled) override { return (*classifier)((*dropout)(pooled)); }

  std::shared_ptr<Dropout<T, D>> dropout;
  std::shared_ptr<Linear<T, D>> classifier;
};

template <class T, class D>
struct AlbertPreTrainingOutputs {
  Var<T, D> prediction_logits;  // [N, S, V]
  Var<T, D> sop_logits;         // [N, 2]
};

// AlbertForPreTraining: albert, predictions (MLM), sop_classifier. forward(inputs [N, 3, S]) ->
// [N, S * V + 2], the two heads' logits side by side (AlbertPreTraining reads them).
template <class T = float, class D = Cpu>
class AlbertForPreTraining : public Module<T, D> {
 public:
  // rng (global_rng() when null) gives one draw, the seed of the dropout generator the model keeps.
  explicit AlbertForPreTraining(const AlbertConfig& c, Rng* rng = nullptr)
      : dropout_rng_(std::make_unique<Rng>((rng ? *rng : global_rng()).engine()())) {
    this->register_generator("dropout_rng", dropout_rng_.get());
    albert = this->register_module("albert", std::make_shared<AlbertModel<T, D>>(c, dropout_rng_.get()));
    predictions = this->register_module(
        "predictions", std::make_shared<AlbertMLMHead<T, D>>(c, albert->embeddings->word_embeddings->weight));
    sop_classifier = this->register_module("sop_classifier", std::make_shared<AlbertSOPHead<T, D>>(c, dropout_rng_.get()));
    this->register_tied_parameter("predictions.decoder.weight", "albert.embeddings.word_embeddings.weight");
    this->register_tied_parameter("predictions.decoder.bias", "predictions.bias");
  }

  Var<T, D> forward(const Var<T, D>& inputs) override {
    const auto heads = forward_heads(inputs);
    const std::int64_t n = heads.sop_logits.size(0);
    return concat({reshape(heads.prediction_logits, {n, -1}), heads.sop_logits}, 1);
  }
  AlbertPreTrainingOutputs<T, D> forward_heads(const Var<T, D>& inputs) {
    const auto hidden = albert->hidden(inputs);
    return {(*predictions)(hidden.sequence), (*sop_classifier)(hidden.pooled)};
  }

  const AlbertConfig& config() const { return albert->config(); }

  std::shared_ptr<AlbertModel<T, D>> albert;
  std::shared_ptr<AlbertMLMHead<T, D>> predictions;
  std::shared_ptr<AlbertSOPHead<T, D>> sop_classifier;

 private:
  std::unique_ptr<Rng> dropout_rng_;  // the model's dropout draws; its modules keep pointers
};

namespace detail {

// What AlbertForPreTrainingSequential's layers pass on while the sequence is encoded: the states
// [N, S, C] with the attention mask (1 attend, 0 padding) as one more channel, [N, S, C + 1], so
// that a pipeline stage receives the mask with its input.
template <class T, class D>
struct MaskedStates {
  Var<T, D> states;   // [N, S, C]
  Var<T, D> mask;     // [N, S, 1], no gradient
  Tensor<T, D> padding;  // additive [N, 1, 1, S]; undefined when nothing is padded

  static MaskedStates unpack(const Var<T, D>& x, const char* layer) {
    check(x.shape().rank() == 3 && x.size(2) >= 2, "ALBERT ", layer, ": input of shape ", x.shape(),
          " (expected [N, S, C + 1]: the states, then the attention mask)");
    const std::int64_t channels = x.size(2) - 1;
    MaskedStates out;
    out.states = narrow(x, 2, 0, channels);
    {
      NoGradGuard no_grad;
      out.mask = Var<T, D>(narrow(x.detach(), 2, channels, 1).value());
    }
    const Tensor<T> mask = on_host(out.mask.value());
    std::vector<bool> padded(static_cast<std::size_t>(mask.numel()));
    bool any = false;
    for (std::int64_t i = 0; i < mask.numel(); ++i) any = (padded[static_cast<std::size_t>(i)] = mask[i] == T(0)) || any;
    if (any) out.padding = key_padding_mask<T, D>(padded, x.size(0), x.size(1));
    return out;
  }
  Var<T, D> pack(const Var<T, D>& new_states) const { return ptrain::concat({new_states, mask}, 2); }
};

}  // namespace detail

// The Sequential's layers: the module of each place, its forward reading and writing the packed
// forms above.

// [N, 3, S] -> [N, S, E + 1]
template <class T, class D>
class AlbertEmbeddingsLayer : public AlbertEmbeddings<T, D> {
 public:
  using AlbertEmbeddings<T, D>::AlbertEmbeddings;
  Var<T, D> forward(const Var<T, D>& inputs) override {
    const auto batch = detail::read_albert_inputs(inputs.value(), this->config());
    Tensor<T> mask({batch.batch, batch.length, 1});
    const Tensor<T> host = on_host(inputs.value());
    for (std::int64_t b = 0; b < batch.batch; ++b)
      for (std::int64_t s = 0; s < batch.length; ++s) mask[b * batch.length + s] = host[(b * 3 + 2) * batch.length + s];
    return concat({AlbertEmbeddings<T, D>::forward(batch), Var<T, D>(on_device<D>(mask))}, 2);
  }
};

// embedding_hidden_mapping_in: [N, S, E + 1] -> [N, S, H + 1]
template <class T, class D>
class AlbertMappingInLayer : public Linear<T, D> {
 public:
  using Linear<T, D>::Linear;
  Var<T, D> forward(const Var<T, D>& x) override {
    const auto in = detail::MaskedStates<T, D>::unpack(x, "embedding_hidden_mapping_in");
    return in.pack(Linear<T, D>::forward(in.states));
  }
};

// The shared layer at one of its places: [N, S, H + 1] -> [N, S, H + 1]
template <class T, class D>
class AlbertSharedLayer : public AlbertLayer<T, D> {
 public:
  using AlbertLayer<T, D>::AlbertLayer;
  Var<T, D> forward(const Var<T, D>& x) override {
    const auto in = detail::MaskedStates<T, D>::unpack(x, "layer");
    return in.pack(AlbertLayer<T, D>::forward(in.states, in.padding));
  }
};

// The pooler: [N, S, H + 1] -> [N, S + 1, H], the sequence's states and then the pooled row.
template <class T, class D>
class AlbertPoolerLayer : public Linear<T, D> {
 public:
  using Linear<T, D>::Linear;
  Var<T, D> forward(const Var<T, D>& x) override {
    const Var<T, D> sequence = detail::MaskedStates<T, D>::unpack(x, "pooler").states;
    const std::int64_t n = sequence.size(0), h = sequence.size(2);
    const Var<T, D> pooled = tanh(Linear<T, D>::forward(reshape(narrow(sequence, 1, 0, 1), {n, h})));
    return concat({sequence, reshape(pooled, {n, 1, h})}, 1);
  }
};

// The MLM head, its decoder weight registered here too ("decoder.weight", the word embedding):
// [N, S + 1, H] -> [N, S * V + H], the MLM logits and then the pooled row.
template <class T, class D>
class AlbertMLMHeadLayer : public AlbertMLMHead<T, D> {
 public:
  AlbertMLMHeadLayer(const AlbertConfig& c, Var<T, D> decoder_weight) : AlbertMLMHead<T, D>(c, decoder_weight) {
    this->register_parameter("decoder.weight", std::move(decoder_weight));
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    check(x.shape().rank() == 3 && x.size(1) >= 2, "ALBERT predictions: input of shape ", x.shape(),
          " (expected [N, S + 1, H]: the states, then the pooled row)");
    const std::int64_t n = x.size(0), s = x.size(1) - 1, h = x.size(2);
    const Var<T, D> logits = AlbertMLMHead<T, D>::forward(narrow(x, 1, 0, s));
    return concat({reshape(logits, {n, -1}), reshape(narrow(x, 1, s, 1), {n, h})}, 1);
  }
};

// The SOP head: [N, S * V + H] -> [N, S * V + 2], AlbertForPreTraining's output.
template <class T, class D>
class AlbertSOPHeadLayer : public AlbertSOPHead<T, D> {
 public:
  AlbertSOPHeadLayer(const AlbertConfig& c, Rng* rng) : AlbertSOPHead<T, D>(c, rng), hidden_(c.hidden_size) {}
  Var<T, D> forward(const Var<T, D>& x) override {
    check(x.shape().rank() == 2 && x.size(1) > hidden_, "ALBERT sop_classifier: input of shape ", x.shape(),
          " (expected [N, S * V + H]: the MLM logits, then the pooled row)");
    const std::int64_t logits = x.size(1) - hidden_;
    return concat({narrow(x, 1, 0, logits), AlbertSOPHead<T, D>::forward(narrow(x, 1, logits, hidden_))}, 1);
  }

 private:
  std::int64_t hidden_;
};

// AlbertForPreTraining as a Sequential (see the top of this file): the same parameters under the
// same names, drawn in the same order (so the same seed gives both the same weights), the same
// forward(inputs [N, 3, S]) -> [N, S * V + 2].
template <class T = float, class D = Cpu>
class AlbertForPreTrainingSequential : public Sequential<T, D> {
 public:
  explicit AlbertForPreTrainingSequential(const AlbertConfig& c, Rng* rng = nullptr)
      : config_(c), dropout_rng_(std::make_unique<Rng>((rng ? *rng : global_rng()).engine()())) {
    this->register_generator("dropout_rng", dropout_rng_.get());
    detail::check_albert_sizes<T>(c, "AlbertForPreTrainingSequential");
    check(c.num_hidden_layers >= 1, "AlbertForPreTrainingSequential: ", c.num_hidden_layers,
          " hidden layers (expected at least one)");
    auto embeddings = std::make_shared<AlbertEmbeddingsLayer<T, D>>(c, dropout_rng_.get());
    auto mapping_in = std::make_shared<AlbertMappingInLayer<T, D>>(c.embedding_size, c.hidden_size);
    detail::init_albert_linear(*mapping_in, c);
    auto layer = std::make_shared<AlbertSharedLayer<T, D>>(c, dropout_rng_.get());
    auto pooler = std::make_shared<AlbertPoolerLayer<T, D>>(c.hidden_size, c.hidden_size);
    detail::init_albert_linear(*pooler, c);
    auto predictions = std::make_shared<AlbertMLMHeadLayer<T, D>>(c, embeddings->word_embeddings->weight);
    auto sop = std::make_shared<AlbertSOPHeadLayer<T, D>>(c, dropout_rng_.get());
    this->push_back("albert.embeddings", embeddings);
    this->push_back("albert.encoder.embedding_hidden_mapping_in", mapping_in);
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
      this->push_back("albert.encoder.albert_layer_groups.0.albert_layers.0", layer);
    this->push_back("albert.pooler", pooler);
    this->push_back("predictions", predictions);
    this->push_back("sop_classifier", sop);
    this->register_tied_parameter("predictions.decoder.weight", "albert.embeddings.word_embeddings.weight");
    this->register_tied_parameter("predictions.decoder.bias", "predictions.bias");
  }

  const AlbertConfig& config() const { return config_; }

 private:
  AlbertConfig config_;
  std::unique_ptr<Rng> dropout_rng_;  // the model's dropout draws; its modules keep pointers
};

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertEmbeddings)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertAttention)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertLayer)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertTransformer)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertModel)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertMLMHead)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertSOPHead)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertForPreTraining)
PTRAIN_PREBUILT_MODELS_FD(ptrain::AlbertForPreTrainingSequential)
