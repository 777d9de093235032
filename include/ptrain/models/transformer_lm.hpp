#pragma once
// The language model of PyTorch's transformer tutorial (TransformerModel), with its names so its
// state_dict loads: encoder (Embedding), pos_encoder (PositionalEncoding, buffer pe),
// transformer_encoder.layers.N.* (post-norm relu layers), decoder (Linear). Sequence-first: tokens
// [S, N] (whole numbers held as T) -> logits [S, N, ntoken]; batch_first: [N, S] -> [N, S, ntoken].
// Every forward attends causally, the mask made from S there (the tutorial passes
// generate_square_subsequent_mask(S) each step).
//
// It is a Sequential of one-input layers, so a Pipeline cuts it between any two of them:
//   encoder (embedding times sqrt(emsize)), pos_encoder, transformer_encoder.layers.0 .. N-1
//   (each makes its causal mask from its input's length), decoder.
// Only the activation [S, N, E] crosses between stages. Each of these layers draws its dropout
// from its own generator, seeded from (one draw at construction, the layer's index): its masks are
// the same whichever stage runs it (docs/pipeline.md).
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/nn/embedding.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/sequential.hpp"
#include "ptrain/nn/transformer.hpp"

namespace ptrain {

// The tutorial's arguments: ntoken, emsize (ninp), nhead, nhid, nlayers, dropout.
struct TransformerLMOptions {
  std::int64_t ntoken = 0;
  std::int64_t ninp = 200;
  std::int64_t nhead = 2;
  std::int64_t nhid = 200;
  std::int64_t nlayers = 2;
  double dropout = 0.2;
  // tokens [N, S], logits [N, S, ntoken]: the batch first, where a pipeline cuts micro-batches.
  bool batch_first = false;
};

// The tutorial's `encoder(src) * math.sqrt(ninp)` as one layer, its table still `weight`.
template <class T = float, class D = Cpu>
class ScaledEmbedding : public Embedding<T, D> {
 public:
  ScaledEmbedding(std::int64_t num_embeddings, std::int64_t embedding_dim, double scale)
      : Embedding<T, D>(num_embeddings, embedding_dim), scale_(static_cast<T>(scale)) {}
  Var<T, D> forward(const Var<T, D>& ids) override { return Embedding<T, D>::forward(ids) * scale_; }

 private:
  T scale_;
};

template <class T = float, class D = Cpu>
class TransformerLM : public Sequential<T, D> {
 public:
  // rng (global_rng() when null) gives one draw, the seed of the layers' dropout generators.
  explicit TransformerLM(const TransformerLMOptions& o, Rng* rng = nullptr) : batch_first_(o.batch_first) {
    check(o.ntoken > 0, "TransformerLM: ntoken ", o.ntoken, " (expected a positive vocabulary size)");
    check(o.nlayers > 0, "TransformerLM: nlayers ", o.nlayers, " (expected at least one)");
    // The ids come in as numbers of T: a bfloat16 model would round 257 to 256.
    check(static_cast<double>(o.ntoken) <= max_exact_whole_number<T>(), "TransformerLM: token ids up to ",
          o.ntoken - 1, " are not whole numbers of this T (exact up to ", max_exact_whole_number<T>(),
          "); build the model in float or double");
    const std::uint64_t dropout_seed = (rng ? *rng : global_rng()).engine()();
    const auto dropout_of = [&](std::size_t layer) {
      dropout_rngs_.push_back(std::make_unique<Rng>(detail::mix_seed(dropout_seed, layer)));
      this->register_generator("dropout_rng." + std::to_string(layer), dropout_rngs_.back().get());
      return dropout_rngs_.back().get();
    };
    encoder = std::make_shared<ScaledEmbedding<T, D>>(o.ntoken, o.ninp, std::sqrt(static_cast<double>(o.ninp)));
    this->push_back("encoder", encoder);
    pos_encoder = std::make_shared<PositionalEncoding<T, D>>(o.ninp, o.dropout, 5000, dropout_of(1), o.batch_first);
    this->push_back("pos_encoder", pos_encoder);
    TransformerEncoderLayerOptions layer;
    layer.d_model = o.ninp;
    layer.nhead = o.nhead;
    layer.dim_feedforward = o.nhid;
    layer.dropout = o.dropout;
    layer.batch_first = o.batch_first;
    layer.causal = true;
    for (std::int64_t i = 0; i < o.nlayers; ++i) {
      layers.push_back(std::make_shared<TransformerEncoderLayer<T, D>>(layer, dropout_of(this->size())));
      this->push_back("transformer_encoder.layers." + std::to_string(i), layers.back());
    }
    decoder = std::make_shared<Linear<T, D>>(o.ninp, o.ntoken);
    this->push_back("decoder", decoder);
    // init_weights(): encoder and decoder weights U(-0.1, 0.1), decoder bias 0.
    init::on_host(encoder->weight.value(), [](Tensor<T>& w) { init::uniform(w, -0.1, 0.1); });
    init::on_host(decoder->weight.value(), [](Tensor<T>& w) { init::uniform(w, -0.1, 0.1); });
    decoder->bias.value().copy_from(Tensor<T, D>::zeros({o.ntoken}));
  }

  Var<T, D> forward(const Var<T, D>& tokens) override {
    check(tokens.shape().rank() == 2, "TransformerLM: tokens of shape ", tokens.shape(), " (expected ",
          batch_first_ ? "[N, S]" : "[S, N]", ")");
    return Sequential<T, D>::forward(tokens);
  }

  std::shared_ptr<Embedding<T, D>> encoder;
  std::shared_ptr<PositionalEncoding<T, D>> pos_encoder;
  std::vector<std::shared_ptr<TransformerEncoderLayer<T, D>>> layers;  // transformer_encoder.layers.N
  std::shared_ptr<Linear<T, D>> decoder;

 private:
  bool batch_first_;
  std::vector<std::unique_ptr<Rng>> dropout_rngs_;  // held here; the layers keep pointers
};

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::ScaledEmbedding)
PTRAIN_PREBUILT_MODELS_FD(ptrain::TransformerLM)
