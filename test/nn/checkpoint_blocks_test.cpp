// Activation checkpointing of modules (Module::checkpoint_activations, checkpoint_blocks): a ResNet
// and a TransformerLM with dropout get the plain run's gradients and batch norm statistics in
// double, while each checkpointed block runs its forward again in backward and keeps no graph.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/nn/checkpoint_blocks.hpp>

#include "../common/recorded_graph.hpp"

using namespace ptrain;
using test::max_abs_difference;
using test::recorded_ops;

BOOST_AUTO_TEST_SUITE(checkpoint_blocks_test)

namespace {

// The largest difference between the two models' parameter gradients and buffers, name by name.
double max_difference_of_state(Module<double>& a, Module<double>& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  BOOST_REQUIRE_EQUAL(pa.size(), pb.size());
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    BOOST_REQUIRE(pa[i].second.grad().defined());
    BOOST_REQUIRE(pb[i].second.grad().defined());
    worst = std::max(worst, max_abs_difference(pa[i].second.grad(), pb[i].second.grad()));
  }
  const auto ba = a.named_buffers(), bb = b.named_buffers();
  BOOST_REQUIRE_EQUAL(ba.size(), bb.size());
  for (std::size_t i = 0; i < ba.size(); ++i) worst = std::max(worst, max_abs_difference(*ba[i].second, *bb[i].second));
  return worst;
}

// Counts the forwards of a module (its forward hook runs after each, the recompute's included).
struct ForwardCounter {
  int runs = 0;
  void watch(Module<double>& m) {
    m.set_forward_hook([this](const Var<double>& y) {
      ++runs;
      return y;
    });
  }
};

Module<double>& module_named(Module<double>& model, const std::string& name) {
  for (auto& [n, m] : model.named_modules())
    if (n == name) return *m;
  BOOST_FAIL("no module " << name);
  throw;
}

Var<double> tokens(std::int64_t s, std::int64_t n, std::int64_t vocabulary, std::uint64_t seed) {
  Rng rng(seed);
  Tensor<double> t({s, n});
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<double>(rng.engine()() % vocabulary);
  return Var<double>(t);
}
}  // namespace

BOOST_AUTO_TEST_CASE(finds_resnets_residual_blocks_and_a_transformers_layers) {
  BOOST_TEST(checkpoint_blocks(*resnet50<float>({.num_classes = 10})) == 16u);
  auto r18 = resnet18<float>({.num_classes = 10});
  BOOST_TEST(checkpoint_blocks(*r18) == 8u);
  BOOST_TEST((*r18)[4]->children().size() == 2u);  // layer1, whose two blocks are checkpointed
  BOOST_TEST((*r18)[4]->children()[0].second->checkpoints_activations());
  BOOST_TEST(!(*r18)[0]->checkpoints_activations());  // the stem convolution is left alone
  TransformerLM<float> lm({.ntoken = 9, .ninp = 8, .nhead = 2, .nhid = 12, .nlayers = 3, .dropout = 0.2});
  BOOST_TEST(checkpoint_blocks(lm) == 3u);
  for (const auto& layer : lm.layers) BOOST_TEST(layer->checkpoints_activations());
  BOOST_TEST(!lm.pos_encoder->checkpoints_activations());
  BOOST_TEST(checkpoint_blocks(lm, false) == 3u);
  BOOST_TEST(!lm.layers[0]->checkpoints_activations());
}

// A ResNet-18 (CIFAR stem) in training: the same gradients and running statistics, checkpointed or not.
BOOST_AUTO_TEST_CASE(resnet_gradients_and_statistics_equal_the_plain_runs) {
  manual_seed(21);
  auto plain = resnet18<double>({.num_classes = 5, .cifar_stem = true});
  manual_seed(21);
  auto checkpointed = resnet18<double>({.num_classes = 5, .cifar_stem = true});
  BOOST_REQUIRE_EQUAL(checkpoint_blocks(*checkpointed), 8u);
  // the shortcut's convolution runs through operator() (the block calls its Sequential), so its hook counts
  ForwardCounter plain_runs, checkpointed_runs;
  plain_runs.watch(module_named(*plain, "layer2.0.downsample.0"));
  checkpointed_runs.watch(module_named(*checkpointed, "layer2.0.downsample.0"));
  const Tensor<double> x = random_tensor({2, 3, 8, 8}, 22), seed = random_tensor({2, 5}, 23);
  const Var<double> y_plain = (*plain)(Var<double>(x.clone(), true));
  const Var<double> y_checkpointed = (*checkpointed)(Var<double>(x.clone(), true));
  BOOST_TEST(max_abs_difference(y_plain.value(), y_checkpointed.value()) == 0.0);
  BOOST_TEST(recorded_ops(y_checkpointed) * 3 < recorded_ops(y_plain));
  backward(y_plain, seed.clone());
  backward(y_checkpointed, seed.clone());
  BOOST_TEST(plain_runs.runs == 1);
  BOOST_TEST(checkpointed_runs.runs == 2);  // layer2.0 ran again in backward
  BOOST_TEST(max_difference_of_state(*plain, *checkpointed) <= 1e-12);
  // running statistics updated once: num_batches_tracked is 1 everywhere
  for (auto& [name, b] : checkpointed->named_buffers())
    if (name.ends_with("num_batches_tracked")) BOOST_TEST((*b)[0] == 1.0, name);
}

// A TransformerLM with dropout on: each layer draws its masks from the model's generators and
// global_rng(); the recompute draws the same ones, so the gradients are the plain run's.
BOOST_AUTO_TEST_CASE(transformer_lm_gradients_with_dropout_equal_the_plain_runs) {
  const TransformerLMOptions o{.ntoken = 11, .ninp = 8, .nhead = 2, .nhid = 12, .nlayers = 2, .dropout = 0.3};
  global_rng().seed(31);
  TransformerLM<double> plain(o);
  global_rng().seed(31);
  TransformerLM<double> checkpointed(o);
  BOOST_REQUIRE_EQUAL(checkpoint_blocks(checkpointed), 2u);
  ForwardCounter plain_runs, checkpointed_runs;
  plain_runs.watch(*plain.layers[1]->linear1);  // called through operator() by the layer
  checkpointed_runs.watch(*checkpointed.layers[1]->linear1);
  const Var<double> x = tokens(5, 3, o.ntoken, 32);
  const std::vector<std::int64_t> targets{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2, 3, 4};
  global_rng().seed(33);
  const Var<double> logits_plain = plain(x);
  global_rng().seed(33);
  const Var<double> logits_checkpointed = checkpointed(x);
  BOOST_TEST(max_abs_difference(logits_plain.value(), logits_checkpointed.value()) == 0.0);
  BOOST_TEST(recorded_ops(logits_checkpointed) * 2 < recorded_ops(logits_plain));
  backward(cross_entropy(reshape(logits_plain, {15, o.ntoken}), targets));
  backward(cross_entropy(reshape(logits_checkpointed, {15, o.ntoken}), targets));
  BOOST_TEST(plain_runs.runs == 1);
  BOOST_TEST(checkpointed_runs.runs == 2);
  BOOST_TEST(max_difference_of_state(plain, checkpointed) <= 1e-12);
  // dropout acted: the model in evaluation gives other logits
  checkpointed.eval();
  BOOST_TEST(max_abs_difference(checkpointed(x).value(), logits_plain.value()) > 1e-6);
  BOOST_TEST(checkpointed_runs.runs == 3);  // evaluation runs it once, no recompute
}

BOOST_AUTO_TEST_CASE(a_checkpointed_block_matches_finite_differences) {
  manual_seed(41);
  auto net = make<Sequential<double>>();
  auto block = make<Bottleneck<double>>(8, 2, 1);
  net->push_back(block);
  block->checkpoint_activations();
  // in training (batch statistics: a function of the whole batch, which the differences handle),
  // the only mode in which it recomputes
  const auto f = [&](const std::vector<Var<double>>& v) { return (*net)(v[0]); };
  const auto r = gradcheck(f, {random_tensor({2, 8, 4, 4}, 42)});
  BOOST_TEST(r.ok, r.report);
  const auto rp = gradcheck_parameters([&] { return (*net)(Var<double>(random_tensor({2, 8, 4, 4}, 43))); },
                                       net->named_parameters());
  BOOST_TEST(rp.ok, rp.report);
}

BOOST_AUTO_TEST_SUITE_END()
