// Transfer learning end to end: pretrained weights loaded, the backbone frozen, the classifier
// head replaced; the optimizers leave frozen parameters bit for bit alone.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/sgd.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using test::contains;
using test::error_of;

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

BOOST_AUTO_TEST_SUITE(transfer_test)

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

BOOST_AUTO_TEST_SUITE_END()
