// Transfer learning end to end: pretrained weights loaded, the backbone frozen, the classifier
// head replaced; the optimizers leave frozen parameters bit for bit alone.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/sgd.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using test::contains;
using test::error_of;

BOOST_AUTO_TEST_SUITE(transfer_test)

namespace {

std::vector<std::vector<float>> values(const std::vector<std::pair<std::string, Tensor<float>>>& entries) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : entries) out.push_back(t.to_vector());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A 10-class "pretrained" ResNet-18 saved, loaded into a fresh one, frozen, and given a 5-class
// head; then steps of the optimizer that make() returns on all of the model's parameters.
// The "pretrained" weights, saved once for the test cases that use them.
const std::filesystem::path& pretrained_file() {
  static const std::filesystem::path path = [] {
    manual_seed(11);
    const auto p = test::test_dir() / "pretrained.safetensors";
    save_state_dict(*resnet18<float>({.num_classes = 10, .cifar_stem = true}), p);
    return p;
  }();
  return path;
}

template <class MakeOptimizer>
void fine_tune_head(MakeOptimizer make_optimizer) {
  const auto& path = pretrained_file();
  auto model = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  BOOST_REQUIRE(load_state_dict(*model, path).all_matched());

  // A backward pass before freezing leaves every parameter a gradient.
  Rng rng(3);
  Tensor<float> images({2, 3, 8, 8});
  for (std::int64_t i = 0; i < images.numel(); ++i) images[i] = static_cast<float>(rng.normal());
  const std::vector<std::int64_t> targets{4, 1};
  backward(cross_entropy(model->forward(Var<float>(images)), targets));

  model->set_requires_grad(false);
  auto head = make<Linear<float>>(512, 5);
  replace_child(*model, "fc", head);
  // eval() keeps the backbone's BatchNorm statistics too, as in PyTorch.
  model->eval();
  head->train();

  const auto backbone_before = values(detail::state_entries(*model));
  const auto head_before = head->weight.value().to_vector();
  auto optimizer = make_optimizer(model->parameters());
  for (int step = 0; step < 3; ++step) {
    // The first step still sees the backbone's stale gradients: a parameter whose requires_grad
    // is off is skipped whatever its grad holds (torch.optim would apply such a grad).
    if (step > 0) optimizer.zero_grad();
    const auto logits = model->forward(Var<float>(images));
    BOOST_REQUIRE(logits.shape() == (Shape{2, 5}));
    backward(cross_entropy(logits, targets));
    optimizer.step();
  }

  const auto entries = detail::state_entries(*model);
  const auto after = values(entries);
  std::size_t frozen = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].first.starts_with("fc.")) continue;
    ++frozen;
    BOOST_TEST(same_bits(after[i], backbone_before[i]), entries[i].first << " changed");
  }
  BOOST_TEST(frozen == 120u);  // 60 parameters and 60 buffers of the backbone
  for (auto& [name, p] : model->named_parameters())
    if (!name.starts_with("fc.")) BOOST_TEST(!p.grad().defined(), name << " got a gradient");
  BOOST_TEST(!same_bits(head->weight.value().to_vector(), head_before));
}

}  // namespace

BOOST_AUTO_TEST_CASE(replace_child_puts_the_new_head_in_the_old_place) {
  auto model = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  replace_child(*model, "fc", make<Linear<float>>(512, 5));
  const auto named = model->named_parameters();
  BOOST_TEST(named.back().first == "fc.bias");
  BOOST_TEST(named.back().second.shape() == (Shape{5}));
  BOOST_TEST(named.size() == 62u);
  BOOST_TEST(model->children().back().first == "fc");
  // A nested Sequential child can be replaced through its dotted path.
  replace_child(*model, "layer4.1", make<BasicBlock<float>>(512, 512, 1));
  BOOST_TEST(contains(error_of([&] { replace_child(*model, "layer1.0.conv1", make<Linear<float>>(1, 1)); }),
                      "'layer1.0' is not a Sequential"));
  BOOST_TEST(contains(error_of([&] { replace_child(*model, "layer9.0", make<Linear<float>>(1, 1)); }),
                      "the model has no child named 'layer9'"));
  BOOST_TEST(contains(error_of([&] { replace_child(*model, "head", make<Linear<float>>(1, 1)); }),
                      "no child named 'head'"));
  BOOST_TEST(contains(error_of([&] { replace_child<float>(*model, "fc", nullptr); }), "is null"));
}

BOOST_AUTO_TEST_CASE(sgd_with_momentum_and_weight_decay_leaves_a_frozen_backbone_alone) {
  fine_tune_head([](std::vector<Var<float>> params) {
    return Sgd<float>(std::move(params), {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  });
}

BOOST_AUTO_TEST_CASE(adamw_leaves_a_frozen_backbone_alone) {
  fine_tune_head([](std::vector<Var<float>> params) {
    return AdamW<float>(std::move(params), {.lr = 0.01, .weight_decay = 0.1});
  });
}

// torchvision's FrozenBatchNorm2d: in training mode a frozen layer computes what eval mode does
// (running statistics), moves neither its statistics nor its batch count, and trains nothing; the
// input still gets eval mode's gradient.
BOOST_AUTO_TEST_CASE(a_frozen_batch_norm_trains_as_it_evaluates) {
  manual_seed(5);
  Rng rng(6);
  Tensor<double> x({4, 3, 5, 5});
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = 2 + 3 * rng.normal();
  auto run = [&](bool freeze, bool training) {
    BatchNorm2d<double> bn(3);
    for (std::int64_t c = 0; c < 3; ++c) {
      bn.running_mean[c] = 0.5 * double(c);
      bn.running_var[c] = 1.5 + double(c);
      bn.weight.value()[c] = 1 + 0.25 * double(c);
      bn.bias.value()[c] = -0.5 * double(c);
    }
    if (freeze) bn.freeze();
    bn.train(training);
    Var<double> input(x.clone(), true);
    Var<double> y = bn.forward(input);
    Tensor<double> weights(y.shape());
    for (std::int64_t i = 0; i < weights.numel(); ++i) weights[i] = std::sin(double(i));
    backward(sum(mul(y, Var<double>(weights))));
    return std::tuple{y.value().to_vector(), input.grad().to_vector(), bn.running_mean.to_vector(),
                      bn.running_var.to_vector(), bn.num_batches_tracked[0], bn.weight.grad().defined()};
  };
  const auto [y_eval, gx_eval, mean_eval, var_eval, count_eval, weight_grad_eval] = run(false, false);
  const auto [y, gx, mean, var, count, weight_grad] = run(true, true);
  BOOST_TEST(y == y_eval, boost::test_tools::per_element());
  BOOST_TEST(gx == gx_eval, boost::test_tools::per_element());
  BOOST_TEST(mean == mean_eval, boost::test_tools::per_element());
  BOOST_TEST(var == var_eval, boost::test_tools::per_element());
  BOOST_TEST(count == 0.0);
  BOOST_TEST(!weight_grad);
  const auto [y_batch, gx_batch, mean_batch, var_batch, count_batch, weight_grad_batch] = run(false, true);
  BOOST_TEST(count_batch == 1.0);  // unfrozen training does use and move the batch statistics
  BOOST_TEST(mean_batch != mean_eval);
}

BOOST_AUTO_TEST_CASE(freeze_batch_norm_freezes_every_batch_norm_of_a_network) {
  auto model = resnet18<float>({.num_classes = 5});
  BOOST_TEST(freeze_batch_norm(*model) == 20u);  // bn1, two per basic block, three downsamples
  for (const auto& [name, module] : model->named_modules())
    if (auto* bn = dynamic_cast<BatchNorm2d<float>*>(module)) {
      BOOST_TEST_CONTEXT(name) {
        BOOST_TEST(bn->frozen());
        BOOST_TEST(!bn->weight.requires_grad());
      }
    }
  BOOST_TEST(model->named_parameters().back().second.requires_grad());  // fc stays trainable
}

BOOST_AUTO_TEST_SUITE_END()
