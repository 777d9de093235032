// AlbertForPreTraining against HuggingFace transformers on fixed weights: the state_dict HF wrote
// (test/nn/data/albert_weights.safetensors, the tied decoder names included) loads strictly, and
// both heads' logits, the pre-training loss (AlbertPreTraining) and every parameter gradient match
// within 1e-4 relative on a padded batch; the whole model's gradient passes a finite-difference
// check in double; weights saved here load back. AlbertForPreTrainingSequential, the form a
// pipeline cuts, has the same names, order and initial weights and matches the same reference. The
// reference values come from test/nn/data/make_albert_reference.py.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/io/safetensors.hpp>
#include <ptrain/models/albert.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/tasks/albert_pretraining.hpp>

#include "../common/files.hpp"
#include "../common/reference_files.hpp"

using namespace ptrain;
using test::expect_close;
using test::relative_difference;
using test::whole_numbers;

BOOST_AUTO_TEST_SUITE(albert_test)

namespace {
std::filesystem::path data(const std::string& file) { return test::reference_file(file); }

// make_albert_reference.py's configuration.
AlbertConfig reference_config() {
  return {.vocab_size = 23, .embedding_size = 6, .hidden_size = 8, .num_hidden_layers = 3, .num_attention_heads = 2,
          .intermediate_size = 12, .max_position_embeddings = 16};
}

struct ReferenceBatch {
  Tensor<float> inputs;  // [N, 3, S]
  AlbertTargets targets;
};
ReferenceBatch reference_batch(const io::SafetensorsFile& reference) {
  const Tensor<float> ids = reference.read<float>("input_ids");
  const std::int64_t n = ids.size(0), s = ids.size(1);
  const auto input_ids = whole_numbers(ids), types = whole_numbers(reference.read<float>("token_type_ids")),
             mask = whole_numbers(reference.read<float>("attention_mask"));
  ReferenceBatch out;
  out.inputs = albert_inputs<float>(input_ids, types, mask, n, s);
  out.targets.mlm_labels = Tensor<std::int64_t>({n, s});
  const auto labels = whole_numbers(reference.read<float>("labels"));
  for (std::int64_t i = 0; i < n * s; ++i) out.targets.mlm_labels[i] = labels[static_cast<std::size_t>(i)];
  out.targets.sop_labels = whole_numbers(reference.read<float>("sentence_order_label"));
  return out;
}
}  // namespace

BOOST_AUTO_TEST_CASE(names_and_sizes_are_huggingfaces) {
  const io::SafetensorsFile reference(data("albert_reference.safetensors"));
  AlbertForPreTraining<float> model(reference_config());
  std::set<std::string> hf;
  for (const auto& info : reference.tensors())
    if (info.name.starts_with("grad.")) hf.insert(info.name.substr(5));
  std::set<std::string> ours;
  for (const auto& [name, p] : model.named_parameters()) {
    ours.insert(name);
    BOOST_TEST(p.shape() == reference.at("grad." + name).shape, name);
  }
  BOOST_TEST(ours == hf);
  BOOST_TEST(model.named_parameters().size() == 32u);
  // transformers' AlbertForPreTraining(albert-base-v2's config) has 11,813,810 parameters.
  BOOST_TEST(AlbertForPreTraining<float>(AlbertConfig::base()).parameter_count() == 11813810);
}

BOOST_AUTO_TEST_CASE(heads_loss_and_gradients_match_huggingface_on_a_padded_batch) {
  const io::SafetensorsFile reference(data("albert_reference.safetensors"));
  AlbertForPreTraining<float> model(reference_config());
  const auto loaded = load_state_dict(model, data("albert_weights.safetensors"));
  BOOST_REQUIRE(loaded.all_matched());
  model.eval();
  const auto batch = reference_batch(reference);
  const auto heads = model.forward_heads(Var<float>(batch.inputs));
  expect_close(heads.prediction_logits.value(), reference.read<float>("prediction_logits"), "prediction_logits");
  expect_close(heads.sop_logits.value(), reference.read<float>("sop_logits"), "sop_logits");

  const AlbertPreTraining task{.vocab_size = 23};
  const Var<float> output = model(Var<float>(batch.inputs));
  const Var<float> loss = task.loss(output, batch.targets, 1.0);
  expect_close(loss.value().reshape(Shape{1}), reference.read<float>("loss"), "loss");
  backward(loss);
  for (auto& [name, p] : model.named_parameters()) expect_close(p.grad(), reference.read<float>("grad." + name), name);
}

BOOST_AUTO_TEST_CASE(the_whole_model_passes_a_finite_difference_check_in_double) {
  const io::SafetensorsFile reference(data("albert_reference.safetensors"));
  AlbertConfig c = reference_config();
  c.num_hidden_layers = 2;
  AlbertForPreTraining<double> model(c);
  BOOST_REQUIRE(load_state_dict(model, data("albert_weights.safetensors")).all_matched());
  model.eval();
  const auto batch = reference_batch(reference);
  // Padded positions hold id 0, the padding row, which embedding gives no gradient (as torch's
  // padding_idx) though it reaches the output: another id there, still masked, for the check.
  Tensor<double> packed = tensor_cast<double>(batch.inputs);
  for (std::int64_t i = 0; i < packed.numel(); i += 3 * packed.size(2))
    for (std::int64_t s = 0; s < packed.size(2); ++s)
      if (packed[i + s] == 0.0) packed[i + s] = 5.0;
  const Var<double> inputs(packed);
  const AlbertPreTraining task{.vocab_size = 23};
  // The loss and the logits both: the loss reaches only the masked positions' MLM rows.
  const auto r = gradcheck_parameters(
      [&] {
        const Var<double> output = model(inputs);
        return concat({reshape(task.loss(output, batch.targets, 1.0), {1}), reshape(output, {-1})}, 0);
      },
      model.named_parameters());
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(saved_weights_name_the_tied_decoder_once_and_load_back) {
  const std::filesystem::path file = test::temp_dir("albert_test") / "albert.safetensors";
  const io::SafetensorsFile reference(data("albert_reference.safetensors"));
  AlbertForPreTraining<float> model(reference_config());
  BOOST_REQUIRE(load_state_dict(model, data("albert_weights.safetensors")).all_matched());
  save_state_dict(model, file);
  const io::SafetensorsFile saved(file);
  BOOST_TEST(saved.tensors().size() == 32u);
  BOOST_TEST(!saved.find("predictions.decoder.weight"));
  BOOST_TEST(!saved.find("predictions.decoder.bias"));

  AlbertForPreTraining<float> other(reference_config());
  BOOST_REQUIRE(load_state_dict(other, file).all_matched());
  model.eval();
  other.eval();
  const auto batch = reference_batch(reference);
  BOOST_TEST(relative_difference(other(Var<float>(batch.inputs)).value(), model(Var<float>(batch.inputs)).value()) ==
             0.0);
}

BOOST_AUTO_TEST_CASE(a_tied_name_of_another_shape_is_refused_naming_both) {
  const io::SafetensorsFile weights(data("albert_weights.safetensors"));
  std::vector<io::SafetensorsEntry<float>> entries;
  for (const auto& info : weights.tensors())
    entries.push_back({info.name, info.name == "predictions.decoder.weight" ? Tensor<float>::zeros({23, 5})
                                                                            : weights.read<float>(info)});
  const std::filesystem::path file = test::temp_dir("albert_test") / "bad_tie.safetensors";
  io::save_safetensors(file, entries);
  AlbertForPreTraining<float> model(reference_config());
  try {
    load_state_dict(model, file);
    BOOST_FAIL("a decoder weight of shape [23, 5] loaded");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("predictions.decoder.weight: file has [23, 5], model expects [23, 6] (it is "
                                          "albert.embeddings.word_embeddings.weight)") != std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_sequential_form_has_the_same_parameters_and_matches_huggingface) {
  manual_seed(5);
  AlbertForPreTraining<float> model(reference_config());
  manual_seed(5);
  AlbertForPreTrainingSequential<float> sequential(reference_config());
  // The shared layer at its three places and the decoder tied to the word embedding, listed once.
  BOOST_TEST(sequential.size() == 2u + 3u + 3u);
  const auto ours = sequential.named_parameters();
  const auto theirs = model.named_parameters();
  BOOST_REQUIRE_EQUAL(ours.size(), theirs.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    BOOST_TEST(ours[i].first == theirs[i].first);
    BOOST_TEST(relative_difference(ours[i].second.value(), theirs[i].second.value()) == 0.0, ours[i].first);
  }
  BOOST_TEST(sequential.parameter_count() == model.parameter_count());
  int shared_layer_listed = 0;
  for (const auto& [name, m] : sequential.named_modules())
    shared_layer_listed += name == "albert.encoder.albert_layer_groups.0.albert_layers.0";
  BOOST_TEST(shared_layer_listed == 1);

  const io::SafetensorsFile reference(data("albert_reference.safetensors"));
  BOOST_REQUIRE(load_state_dict(sequential, data("albert_weights.safetensors")).all_matched());
  sequential.eval();
  const auto batch = reference_batch(reference);  // padded: the mask travels between the layers
  const Var<float> output = sequential(Var<float>(batch.inputs));
  const std::int64_t n = batch.targets.mlm_labels.size(0), s = batch.targets.mlm_labels.size(1);
  expect_close(narrow(output, 1, 0, s * 23).value().reshape(Shape{n, s, 23}), reference.read<float>("prediction_logits"),
               "prediction_logits");
  expect_close(narrow(output, 1, s * 23, 2).value(), reference.read<float>("sop_logits"), "sop_logits");
  const Var<float> loss = AlbertPreTraining{.vocab_size = 23}.loss(output, batch.targets, 1.0);
  expect_close(loss.value().reshape(Shape{1}), reference.read<float>("loss"), "loss");
  backward(loss);
  for (auto& [name, p] : sequential.named_parameters())
    expect_close(p.grad(), reference.read<float>("grad." + name), name);

  const std::filesystem::path file = test::temp_dir("albert_test") / "sequential.safetensors";
  save_state_dict(sequential, file);
  AlbertForPreTraining<float> other(reference_config());
  BOOST_REQUIRE(load_state_dict(other, file).all_matched());
  other.eval();
  BOOST_TEST(relative_difference(other(Var<float>(batch.inputs)).value(), output.value()) == 0.0);
}

BOOST_AUTO_TEST_CASE(bad_inputs_are_refused_in_a_sentence) {
  AlbertForPreTraining<float> model(reference_config());
  const auto message_of = [&](const Tensor<float>& inputs) {
    try {
      model(Var<float>(inputs));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  BOOST_TEST(message_of(Tensor<float>::zeros({2, 7})).find("expected [N, 3, S]") != std::string::npos);
  const std::vector<std::int64_t> ids{1, 2, 3}, types{0, 2, 0}, mask{1, 1, 0}, bad_mask{1, 3, 1};
  BOOST_TEST(message_of(albert_inputs<float>(ids, types, mask, 1, 3)).find("token_type_id 2") != std::string::npos);
  BOOST_TEST(message_of(albert_inputs<float>(ids, {}, bad_mask, 1, 3)).find("attention_mask 3") != std::string::npos);
  BOOST_TEST(message_of(Tensor<float>::zeros({1, 3, 17})).find("max_position_embeddings 16") != std::string::npos);
  BOOST_CHECK_THROW((AlbertForPreTraining<half>(AlbertConfig::small(30000))), Error);
}

BOOST_AUTO_TEST_SUITE_END()
