// TransformerLM and TransformerEncoderLayer against PyTorch on fixed weights: the tutorial model's
// state_dict as PyTorch wrote it (test/nn/data/transformer_lm_weights.safetensors) loads strictly,
// and logits, loss and every parameter gradient match PyTorch's within 1e-4 relative; so do a
// batch-first, norm_first, gelu layer's output and gradients under a key-padding mask. The
// reference values come from test/nn/data/make_transformer_reference.py.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/io/safetensors.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/nn/transformer.hpp>

#include "../common/reference_files.hpp"

using namespace ptrain;
using test::expect_close;
using test::whole_numbers;

BOOST_AUTO_TEST_SUITE(transformer_parity_test)

namespace {
std::filesystem::path data(const std::string& file) { return test::reference_file(file); }
}  // namespace

BOOST_AUTO_TEST_CASE(transformer_lm_matches_pytorch_from_its_safetensors_file) {
  const io::SafetensorsFile reference(data("transformer_reference.safetensors"));
  TransformerLM<float> model({.ntoken = 11, .ninp = 8, .nhead = 2, .nhid = 16, .nlayers = 2, .dropout = 0.2});
  BOOST_REQUIRE(load_state_dict(model, data("transformer_lm_weights.safetensors")).all_matched());
  model.eval();
  const Var<float> tokens(reference.read<float>("tokens"));
  const Var<float> logits = model(tokens);
  expect_close(logits.value(), reference.read<float>("logits"), "logits");
  const auto targets = whole_numbers(reference.read<float>("targets"));
  const Var<float> loss = cross_entropy(reshape(logits, {-1, 11}), targets);
  expect_close(loss.value().reshape(Shape{1}), reference.read<float>("loss"), "loss");
  backward(loss);
  for (auto& [name, p] : model.named_parameters()) expect_close(p.grad(), reference.read<float>("grad." + name), name);
}

BOOST_AUTO_TEST_CASE(norm_first_gelu_batch_first_layer_matches_pytorch_under_key_padding) {
  const io::SafetensorsFile reference(data("transformer_reference.safetensors"));
  TransformerEncoderLayerOptions o;
  o.d_model = 6;
  o.nhead = 3;
  o.dim_feedforward = 10;
  o.activation = Activation::gelu;
  o.batch_first = true;
  o.norm_first = true;
  TransformerEncoderLayer<float> layer(o);
  for (auto& [name, p] : layer.named_parameters()) p.value().copy_from(reference.read<float>("layer." + name));
  layer.eval();
  Var<float> x(reference.read<float>("layer.input"), true);
  const Tensor<float> flags = reference.read<float>("layer.key_padding");
  std::vector<bool> padded;
  for (std::int64_t i = 0; i < flags.numel(); ++i) padded.push_back(flags[i] != 0.0f);
  AttentionMasks<float> masks;
  masks.key_padding_mask = key_padding_mask<float>(padded, 2, 5);
  const Var<float> y = layer.forward(x, masks);
  expect_close(y.value(), reference.read<float>("layer.output"), "output");
  backward(y, reference.read<float>("layer.grad_output"));
  expect_close(x.grad(), reference.read<float>("layer.grad_input"), "input gradient");
  for (auto& [name, p] : layer.named_parameters())
    expect_close(p.grad(), reference.read<float>("layer.grad." + name), name + " gradient");
}

BOOST_AUTO_TEST_SUITE_END()
