#pragma once
// The language model of PyTorch's transformer tutorial (TransformerModel), with its names so its
// state_dict loads: encoder (Embedding), pos_encoder (PositionalEncoding, buffer pe),
// transformer_encoder.layers.N.* (post-norm relu layers), decoder (Linear). Sequence-first: tokens
// [S, N] (whole numbers held as T) -> logits [S, N, ntoken]. Every forward attends causally, the
// mask made from S there (the tutorial passes generate_square_subsequent_mask(S) each step).
#include <cmath>
#include <cstdint>
#include <memory>

#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/nn/embedding.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/module.hpp"
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
};

template <class T = float, class D = Cpu>
class TransformerLM : public Module<T, D> {
 public:
  explicit TransformerLM(const TransformerLMOptions& o, Rng* rng = nullptr) : ninp_(o.ninp) {
    check(o.ntoken > 0, "TransformerLM: ntoken ", o.ntoken, " (expected a positive vocabulary size)");
    // The tutorial's registration order, which is its state_dict's.
    pos_encoder = this->register_module("pos_encoder", std::make_shared<PositionalEncoding<T, D>>(o.ninp, o.dropout,
                                                                                                  5000, rng));
    TransformerEncoderLayerOptions layer;
    layer.d_model = o.ninp;
    layer.nhead = o.nhead;
    layer.dim_feedforward = o.nhid;
    layer.dropout = o.dropout;
    transformer_encoder = this->register_module(
        "transformer_encoder", std::make_shared<TransformerEncoder<T, D>>(layer, o.nlayers, false, rng));
    encoder = this->register_module("encoder", std::make_shared<Embedding<T, D>>(o.ntoken, o.ninp));
    decoder = this->register_module("decoder", std::make_shared<Linear<T, D>>(o.ninp, o.ntoken));
    // init_weights(): encoder and decoder weights U(-0.1, 0.1), decoder bias 0.
    init::on_host(encoder->weight.value(), [](Tensor<T>& w) { init::uniform(w, -0.1, 0.1); });
    init::on_host(decoder->weight.value(), [](Tensor<T>& w) { init::uniform(w, -0.1, 0.1); });
    decoder->bias.value().copy_from(Tensor<T, D>::zeros({o.ntoken}));
  }

  Var<T, D> forward(const Var<T, D>& tokens) override {
    check(tokens.shape().rank() == 2, "TransformerLM: tokens of shape ", tokens.shape(), " (expected [S, N])");
    Var<T, D> h = (*encoder)(tokens) * static_cast<T>(std::sqrt(static_cast<double>(ninp_)));
    h = (*pos_encoder)(h);
    AttentionMasks<T, D> masks;
    masks.is_causal = true;
    h = transformer_encoder->forward(h, masks);
    return detail::on_rows(*decoder, h);
  }

  std::shared_ptr<PositionalEncoding<T, D>> pos_encoder;
  std::shared_ptr<TransformerEncoder<T, D>> transformer_encoder;
  std::shared_ptr<Embedding<T, D>> encoder;
  std::shared_ptr<Linear<T, D>> decoder;

 private:
  std::int64_t ninp_;
};

}  // namespace ptrain
