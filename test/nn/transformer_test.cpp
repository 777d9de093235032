// The transformer modules: PyTorch's parameter names (TransformerLM's state_dict against the list
// PyTorch's tutorial model gives), a safetensors round trip, the attention layouts and masks, and
// finite-difference checks of whole layers on every device.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/narrow.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/nn/embedding.hpp>
#include <ptrain/nn/layer_norm.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/nn/transformer.hpp>

#include "../common/files.hpp"
#include "../common/typed_devices.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(transformer_test)

namespace {
std::vector<std::string> state_names(Module<float>& m) {
  std::vector<std::string> out;
  for (auto& [name, t] : detail::state_entries(m)) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}
// Tokens [S, N] as the values of a tensor, the form TransformerLM takes.
Var<float> tokens(std::int64_t s, std::int64_t n, std::int64_t vocabulary, std::uint64_t seed) {
  Rng rng(seed);
  Tensor<float> t({s, n});
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(rng.engine()() % vocabulary);
  return Var<float>(t);
}
TransformerEncoderLayerOptions small_layer(bool norm_first, Activation activation, bool batch_first = false) {
  TransformerEncoderLayerOptions o;
  o.d_model = 6;
  o.nhead = 2;
  o.dim_feedforward = 5;
  o.dropout = 0.0;
  o.activation = activation;
  o.norm_first = norm_first;
  o.batch_first = batch_first;
  return o;
}
}  // namespace

BOOST_AUTO_TEST_CASE(transformer_lm_state_dict_has_the_tutorials_names) {
  TransformerLM<float> model({.ntoken = 11, .ninp = 8, .nhead = 2, .nhid = 16, .nlayers = 2, .dropout = 0.2});
  // TransformerModel(ntoken=11, ninp=8, nhead=2, nhid=16, nlayers=2).state_dict().keys(), PyTorch's
  // word-language-model tutorial
  std::vector<std::string> torch_names{"pos_encoder.pe"};
  for (const std::string layer : {"transformer_encoder.layers.0.", "transformer_encoder.layers.1."})
    for (const char* name : {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                             "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                             "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"})
      torch_names.push_back(layer + name);
  for (const char* name : {"encoder.weight", "decoder.weight", "decoder.bias"}) torch_names.emplace_back(name);
  std::sort(torch_names.begin(), torch_names.end());
  BOOST_TEST(state_names(model) == torch_names, boost::test_tools::per_element());
  // and their shapes
  for (auto& [name, t] : detail::state_entries(model)) {
    if (name == "pos_encoder.pe") BOOST_TEST(t.shape() == (Shape{5000, 1, 8}));
    if (name.ends_with("in_proj_weight")) BOOST_TEST(t.shape() == (Shape{24, 8}));
    if (name.ends_with("linear1.weight")) BOOST_TEST(t.shape() == (Shape{16, 8}));
    if (name == "encoder.weight") BOOST_TEST(t.shape() == (Shape{11, 8}));
    if (name == "decoder.weight") BOOST_TEST(t.shape() == (Shape{11, 8}));
  }
}

BOOST_AUTO_TEST_CASE(transformer_lm_round_trips_through_safetensors) {
  const TransformerLMOptions o{.ntoken = 13, .ninp = 8, .nhead = 2, .nhid = 12, .nlayers = 2, .dropout = 0.2};
  global_rng().seed(1);
  TransformerLM<float> saved(o);
  saved.eval();
  const auto path = test::test_dir() / "transformer_lm.safetensors";
  save_state_dict(saved, path);
  global_rng().seed(2);
  TransformerLM<float> loaded(o);
  loaded.eval();
  const Var<float> x = tokens(5, 3, 13, 3);
  const Tensor<float> before = loaded(x).value();
  BOOST_TEST(load_state_dict(loaded, path).all_matched());
  const Tensor<float> want = saved(x).value(), got = loaded(x).value();
  BOOST_REQUIRE(got.shape() == (Shape{5, 3, 13}));
  BOOST_TEST(test::relative_difference(got, want) == 0.0);
  BOOST_TEST(test::relative_difference(before, want) > 1e-3);  // the load changed something
}

BOOST_AUTO_TEST_CASE(transformer_lm_is_causal_and_its_dropout_acts_in_training_only) {
  global_rng().seed(4);
  TransformerLM<float> model({.ntoken = 9, .ninp = 8, .nhead = 2, .nhid = 12, .nlayers = 2, .dropout = 0.3});
  model.eval();
  Var<float> x = tokens(6, 2, 9, 5);
  const Tensor<float> full = model(x).value();
  // the first 4 positions do not see the last 2: the same logits from the first 4 tokens alone
  const Tensor<float> prefix = model(narrow(x, 0, 0, 4)).value();
  for (std::int64_t i = 0; i < prefix.numel(); ++i) BOOST_TEST(std::abs(prefix[i] - full[i]) <= 1e-5);
  BOOST_TEST(test::relative_difference(model(x).value(), full) == 0.0);
  model.train();
  BOOST_TEST(test::relative_difference(model(x).value(), full) > 1e-3);
}

// What a pipeline relies on: TransformerLM is a Sequential of one-input layers, and each layer's
// dropout masks depend on its own forwards only. Two micro-batches run layer by layer in another
// order (layer 0 on both, then layer 1 on both, ...) as stages would, and batch-first, give each
// micro-batch's logits of the whole model run on it.
BOOST_AUTO_TEST_CASE(transformer_lm_layers_draw_dropout_whatever_order_they_run_in) {
  const TransformerLMOptions o{.ntoken = 9, .ninp = 8, .nhead = 2, .nhid = 12, .nlayers = 2, .dropout = 0.3,
                               .batch_first = true};
  global_rng().seed(8);
  TransformerLM<float> whole(o);
  global_rng().seed(8);
  TransformerLM<float> staged(o);
  BOOST_REQUIRE_EQUAL(staged.size(), 5u);  // encoder, pos_encoder, 2 layers, decoder
  BOOST_TEST(staged.children()[2].first == "transformer_encoder.layers.0");
  const std::vector<Var<float>> micro{transpose(tokens(6, 3, 9, 1), 0, 1), transpose(tokens(6, 3, 9, 2), 0, 1)};
  std::vector<Tensor<float>> expected;
  for (const auto& m : micro) expected.push_back(whole(m).value());
  std::vector<Var<float>> h = micro;
  for (std::size_t layer = 0; layer < staged.size(); ++layer)
    for (auto& x : h) x = staged[layer]->forward(x);
  for (std::size_t i = 0; i < micro.size(); ++i) {
    BOOST_REQUIRE(h[i].shape() == (Shape{3, 6, 9}));
    BOOST_TEST(test::relative_difference(h[i].value(), expected[i]) == 0.0);
  }
  // and dropout acted: a model seeded otherwise draws other masks
  global_rng().seed(9);
  TransformerLM<float> other(o);
  for (auto& [name, p] : other.named_parameters()) {
    for (auto& [n, q] : whole.named_parameters())
      if (n == name) p.value().copy_from(q.value());
  }
  BOOST_TEST(test::relative_difference(other(micro[0]).value(), expected[0]) > 1e-3);
}

BOOST_AUTO_TEST_CASE(multihead_attention_batch_first_and_sequence_first_agree) {
  global_rng().seed(6);
  MultiheadAttention<double> seq_first(6, 3);
  MultiheadAttention<double> batch_first(6, 3, 0.0, true, true);
  for (std::size_t i = 0; i < 4; ++i)
    batch_first.parameters()[i].value().copy_from(seq_first.parameters()[i].value());
  BOOST_TEST(seq_first.named_parameters()[0].first == "in_proj_weight");
  BOOST_TEST(seq_first.named_parameters()[3].first == "out_proj.bias");
  const Var<double> q(random_tensor({4, 2, 6}, 7)), kv(random_tensor({5, 2, 6}, 8));  // [L, N, E], [S, N, E]
  AttentionMasks<double> masks;
  masks.key_padding_mask =
      key_padding_mask<double>({false, false, true, false, true, false, false, false, false, true}, 2, 5);
  const Tensor<double> a = seq_first.forward(q, kv, kv, masks).value();
  const Var<double> kv_batch_first = transpose(kv, 0, 1);
  const Tensor<double> b = batch_first.forward(transpose(q, 0, 1), kv_batch_first, kv_batch_first, masks).value();
  BOOST_TEST(test::relative_difference(transpose(Var<double>(b), 0, 1).value(), a) <= 1e-14);
  // key padding leaves the padded keys out: sequence 1 without its last key
  const Tensor<double> alone =
      seq_first.forward(narrow(q, 1, 1, 1), narrow(narrow(kv, 1, 1, 1), 0, 0, 4), narrow(narrow(kv, 1, 1, 1), 0, 0, 4))
          .value();
  const Tensor<double> second = narrow(Var<double>(a), 1, 1, 1).value();
  BOOST_TEST(test::relative_difference(second, alone) <= 1e-13);
}

BOOST_AUTO_TEST_CASE(encoder_layer_names_and_post_norm_output) {
  global_rng().seed(9);
  TransformerEncoderLayer<double> layer(small_layer(false, Activation::relu));
  std::vector<std::string> names;
  for (auto& [name, p] : layer.named_parameters()) names.push_back(name);
  const std::vector<std::string> torch_names{
      "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
      "linear1.weight",           "linear1.bias",           "linear2.weight",            "linear2.bias",
      "norm1.weight",             "norm1.bias",             "norm2.weight",              "norm2.bias"};
  BOOST_TEST(names == torch_names, boost::test_tools::per_element());
  // post-norm: every position of the output has mean 0 and variance 1 (norm2 holds weight 1, bias 0)
  const Tensor<double> y = layer(Var<double>(random_tensor({3, 2, 6}, 10))).value();
  for (std::int64_t row = 0; row < 6; ++row) {
    double mean = 0, var = 0;
    for (int j = 0; j < 6; ++j) mean += y[row * 6 + j] / 6;
    for (int j = 0; j < 6; ++j) var += (y[row * 6 + j] - mean) * (y[row * 6 + j] - mean) / 6;
    BOOST_TEST(std::abs(mean) <= 1e-12);
    BOOST_TEST(std::abs(var - 1.0) <= 1e-4);  // v / (v + eps) for the pre-norm variance v
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(encoder_layers_match_finite_differences, D, test::Devices) {
  for (bool norm_first : {false, true})
    for (Activation activation : {Activation::relu, Activation::gelu}) {
      global_rng().seed(11);
      TransformerEncoderLayer<double, D> layer(small_layer(norm_first, activation));
      AttentionMasks<double, D> causal;
      causal.is_causal = true;
      test::expect_gradcheck_on<D>([&](const auto& v) { return layer.forward(v[0], causal); },
                                   {random_tensor({4, 2, 6}, 12)});
    }
  global_rng().seed(13);
  TransformerEncoder<double, D> encoder(small_layer(false, Activation::gelu, true), 2, true);
  test::expect_gradcheck_on<D>([&](const auto& v) { return encoder(v[0]); }, {random_tensor({2, 3, 6}, 14)});
}

// A bfloat16 model takes its token ids as bfloat16, whole numbers exact up to 256: a larger
// vocabulary is refused, not read rounded (257 as 256).
BOOST_AUTO_TEST_CASE(transformer_lm_refuses_token_ids_its_type_rounds) {
  TransformerLMOptions o{.ntoken = 257, .ninp = 8, .nhead = 2, .nhid = 12, .nlayers = 1, .dropout = 0.0};
  BOOST_TEST(test::error_message([&] { TransformerLM<ptrain::bfloat16> model(o); })
                 .find("TransformerLM: token ids up to 256 are not whole numbers of this T (exact up to 256)") !=
             std::string::npos);
  BOOST_TEST(TransformerLM<float>(o).parameter_count() > 0);
  o.ntoken = 256;
  BOOST_TEST(TransformerLM<ptrain::bfloat16>(o).parameter_count() > 0);
  BOOST_TEST(max_exact_whole_number<float>() == 16777216.0);
  BOOST_TEST(max_exact_whole_number<ptrain::half>() == 2048.0);
}

BOOST_AUTO_TEST_CASE(modules_check_their_sizes) {
  BOOST_TEST(test::error_message([] { MultiheadAttention<float> m(6, 4); })
                 .find("embed_dim must be a positive multiple of num_heads") != std::string::npos);
  Embedding<float> e(4, 3, 0);
  for (std::int64_t c = 0; c < 3; ++c) BOOST_TEST(e.weight.value()[c] == 0.0f);  // the padding row
  LayerNorm<float> norm(Shape{3});
  BOOST_TEST(norm.named_parameters().size() == 2u);
  BOOST_TEST(test::error_message([] {
               PositionalEncoding<float> pe(4, 0.0, 3);
               (void)pe(Var<float>(Tensor<float>::zeros({4, 1, 4})));
             }).find("PositionalEncoding: input [4, 1, 4] (expected [S, N, 4] with S at most 3)") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
