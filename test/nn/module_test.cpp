#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/models/small_cnn.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>

#include "../common/torchvision_models.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(module_test)

BOOST_AUTO_TEST_CASE(names_are_hierarchical_in_registration_order) {
  auto block = make<Sequential<float>>(std::initializer_list<std::pair<std::string, std::shared_ptr<Module<float>>>>{
      {"fc", make<Linear<float>>(4, 3)}, {"bn", make<BatchNorm2d<float>>(3)}});
  Sequential<float> net{make<Linear<float>>(5, 4), block};
  std::vector<std::string> names;
  for (auto& [name, p] : net.named_parameters()) names.push_back(name);
  const std::vector<std::string> expected{"0.weight", "0.bias", "1.fc.weight", "1.fc.bias", "1.bn.weight", "1.bn.bias"};
  BOOST_TEST(names == expected, boost::test_tools::per_element());
  std::vector<std::string> buffers;
  for (auto& [name, b] : net.named_buffers()) buffers.push_back(name);
  const std::vector<std::string> expected_buffers{"1.bn.running_mean", "1.bn.running_var", "1.bn.num_batches_tracked"};
  BOOST_TEST(buffers == expected_buffers, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(named_modules_lists_the_module_then_its_submodules_depth_first) {
  auto fc = make<Linear<float>>(4, 3);
  auto block = make<Sequential<float>>(std::initializer_list<std::pair<std::string, std::shared_ptr<Module<float>>>>{
      {"fc", fc}, {"bn", make<BatchNorm2d<float>>(3)}});
  Sequential<float> net{make<Linear<float>>(5, 4), block, make<Linear<float>>(3, 2)};
  const auto modules = net.named_modules();
  std::vector<std::string> names;
  for (const auto& [name, m] : modules) names.push_back(name);
  const std::vector<std::string> expected{"", "0", "1", "1.fc", "1.bn", "2"};
  BOOST_TEST(names == expected, boost::test_tools::per_element());
  BOOST_TEST(modules[0].second == &net);
  BOOST_TEST(modules[2].second == block.get());
  BOOST_TEST(modules[3].second == fc.get());
}

BOOST_AUTO_TEST_CASE(named_modules_of_resnet18_carry_torchvision_names) {
  auto net = resnet18<float>();
  const auto modules = net->named_modules();
  std::vector<std::string> names;
  for (const auto& [name, m] : modules) names.push_back(name);
  BOOST_TEST(names.front() == "");
  BOOST_TEST(modules.front().second == net.get());
  BOOST_TEST(names[1] == "conv1");
  const auto at = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  // Pre-order: a block comes before its layers, the layers in registration order, then the next block.
  BOOST_TEST(at("layer1") < at("layer1.0"));
  BOOST_TEST(at("layer1.0") + 1 == at("layer1.0.conv1"));
  BOOST_TEST(at("layer1.0.conv1") < at("layer1.0.bn1"));
  BOOST_TEST(at("layer1.0.bn2") < at("layer1.1"));
  BOOST_TEST(at("layer2.0.downsample") + 1 == at("layer2.0.downsample.0"));
  BOOST_TEST(at("layer4.1.bn2") < at("fc"));
  BOOST_TEST(names.back() == "fc");
  // Each parameter's owner is the module under its name's prefix, and owns it directly.
  for (const auto& [name, p] : net->named_parameters()) {
    const std::string owner = name.substr(0, name.rfind('.'));
    const auto i = static_cast<std::size_t>(at(owner));
    BOOST_TEST_REQUIRE(i < modules.size(), name);
    bool owns = false;
    for (const auto& [local, q] : modules[i].second->named_parameters())
      owns = owns || (local == name.substr(owner.size() + 1) && q.node() == p.node());
    BOOST_TEST(owns, name);
  }
}

BOOST_AUTO_TEST_CASE(duplicate_names_are_rejected) {
  Sequential<float> net;
  net.push_back("a", make<Linear<float>>(2, 2));
  BOOST_CHECK_THROW(net.push_back("a", make<Linear<float>>(2, 2)), Error);
}

// As PyTorch's named_parameters() and named_modules(): a module at two places and a parameter of
// two modules are listed once, under the first name; forward runs the module at both places and
// backward adds both uses into the one gradient.
BOOST_AUTO_TEST_CASE(a_module_or_parameter_used_twice_is_listed_once) {
  struct Tied : Module<float> {
    explicit Tied(Var<float> w) { weight = this->register_parameter("weight", std::move(w)); }
    Var<float> forward(const Var<float>& x) override { return x * weight; }
    Var<float> weight;
  };
  auto layer = make<Linear<float>>(2, 2);
  Sequential<float> net;
  net.push_back("layer", layer);
  net.push_back("layer", layer);
  net.push_back("tied", make<Tied>(layer->bias));
  BOOST_TEST(net.size() == 3u);
  std::vector<std::string> names;
  for (auto& [name, p] : net.named_parameters()) names.push_back(name);
  const std::vector<std::string> expected{"layer.weight", "layer.bias"};
  BOOST_TEST(names == expected, boost::test_tools::per_element());
  std::vector<std::string> modules;
  for (auto& [name, m] : net.named_modules()) modules.push_back(name);
  const std::vector<std::string> expected_modules{"", "layer", "tied"};
  BOOST_TEST(modules == expected_modules, boost::test_tools::per_element());
  BOOST_TEST(net.parameter_count() == 6);

  // y = (W (W x + b) + b) * b: d/db sums the bias's three uses.
  layer->weight.value().copy_from(Tensor<float>::from({2, 2}, {1, 0, 0, 1}));
  layer->bias.value().copy_from(Tensor<float>::from({2}, {1, 2}));
  backward(sum(net(Var<float>(Tensor<float>::from({1, 2}, {1, 1})))));
  // y_i = (x_i + 2 b_i) b_i, so dy_i/db_i = x_i + 4 b_i.
  BOOST_TEST(layer->bias.grad().to_vector() == std::vector<float>({5, 9}), boost::test_tools::per_element());
  // Another module under a name already taken is still refused.
  BOOST_CHECK_THROW(net.push_back("layer", make<Linear<float>>(2, 2)), Error);
}

BOOST_AUTO_TEST_CASE(resnet18_matches_torchvision) {
  auto net = resnet18<float>();
  BOOST_TEST(net->parameter_count() == 11689512);
  auto named = net->named_parameters();
  BOOST_TEST(named.size() == 62u);
  BOOST_TEST(named.front().first == "conv1.weight");
  BOOST_TEST(named[1].first == "bn1.weight");
  BOOST_TEST(named[3].first == "layer1.0.conv1.weight");
  bool found_downsample = false;
  for (auto& [name, p] : named)
    if (name == "layer2.0.downsample.0.weight") {
      found_downsample = true;
      BOOST_TEST(p.shape() == (Shape{128, 64, 1, 1}));
    }
  BOOST_TEST(found_downsample);
  BOOST_TEST(named.back().first == "fc.bias");
  test::expect_torchvision_parameters(*net, "resnet18_names.txt");
  BOOST_TEST(resnet50<float>()->parameter_count() == 25557032);
  BOOST_TEST(resnet34<float>()->parameter_count() == 21797672);
}

BOOST_AUTO_TEST_CASE(train_eval_and_freeze_reach_every_child) {
  SmallCnn<float> net;
  net.eval();
  for (auto& [name, child] : net.children()) BOOST_TEST(!child->is_training());
  net.train();
  BOOST_TEST(net[0]->is_training());
  net[0]->set_requires_grad(false);
  int frozen = 0;
  for (auto& [name, p] : net.named_parameters()) frozen += p.requires_grad() ? 0 : 1;
  BOOST_TEST(frozen == 2);
}

BOOST_AUTO_TEST_CASE(default_init_follows_pytorch) {
  manual_seed(1);
  Linear<float> fc(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  const auto w = fc.weight.value().array();
  BOOST_TEST(w.abs().maxCoeff() <= bound);
  // U(-b, b) has standard deviation b / sqrt(3).
  const double sd = std::sqrt((w.square().mean()));
  BOOST_TEST(std::abs(sd - bound / std::sqrt(3.0)) < 0.02 * bound);
  BOOST_TEST(fc.bias.value().array().abs().maxCoeff() <= bound);
  BatchNorm2d<float> bn(8);
  BOOST_TEST(bn.weight.value().array().minCoeff() == 1.0f);
  BOOST_TEST(bn.running_var.array().minCoeff() == 1.0f);
}

BOOST_AUTO_TEST_CASE(normal_and_trunc_normal_have_the_asked_moments) {
  Rng rng(3);
  Tensor<double> t({200001});  // odd: the last pair is cut in half
  init::normal(t, 2.0, 0.5, rng);
  BOOST_TEST(std::abs(t.array().mean() - 2.0) < 0.01);
  BOOST_TEST(std::abs(std::sqrt((t.array() - 2.0).square().mean()) - 0.5) < 0.01);
  // Cut at one standard deviation: the standard deviation shrinks to 0.5396 of the untruncated one.
  init::trunc_normal(t, 0.0, 1.0, -1.0, 1.0, rng);
  BOOST_TEST(t.array().abs().maxCoeff() <= 1.0);
  BOOST_TEST(std::abs(std::sqrt(t.array().square().mean()) - 0.5396) < 0.01);
  BOOST_CHECK_THROW(init::trunc_normal(t, 0.0, 1.0, 1.0, 2.0, rng), Error);
}

BOOST_AUTO_TEST_CASE(small_cnn_shapes) {
  SmallCnn<float> net;
  auto y = net.forward(Var<float>(Tensor<float>::zeros({2, 1, 28, 28})));
  BOOST_TEST(y.shape() == (Shape{2, 10}));
}

// The mechanism grad_cam reads a layer with: the hook sees the child's output, and what it returns
// goes on in its place (here a leaf, which backward fills and which cuts the graph below it).
BOOST_AUTO_TEST_CASE(a_forward_hook_sees_a_childs_output_and_can_replace_it) {
  auto fc = make<Linear<float>>(3, 4);
  Sequential<float> net{fc, make<ReLU<float>>()};
  const Var<float> x(Tensor<float>::from(Shape{2, 3}, {1.0f, -2.0f, 0.5f, -1.0f, 3.0f, 2.0f}));
  const Tensor<float> plain = net(x).value().clone();
  const Tensor<float> fc_output = fc->forward(x).value().clone();

  int calls = 0;
  Var<float> leaf;
  fc->set_forward_hook([&](const Var<float>& output) {
    ++calls;
    BOOST_TEST(output.value().to_vector() == fc_output.to_vector(), boost::test_tools::per_element());
    leaf = Var<float>(output.value(), true);
    return leaf;
  });
  BOOST_TEST(fc->has_forward_hook());
  const Var<float> hooked = net(x);
  BOOST_TEST(calls == 1);
  BOOST_TEST(hooked.value().to_vector() == plain.to_vector(), boost::test_tools::per_element());
  backward(sum(hooked));
  BOOST_REQUIRE(leaf.grad().defined());
  for (std::int64_t i = 0; i < fc_output.numel(); ++i)
    BOOST_TEST(leaf.grad()[i] == (fc_output[i] > 0 ? 1.0f : 0.0f));  // relu's gradient
  BOOST_TEST(!fc->weight.grad().defined());  // the graph below the leaf was not reached

  fc->set_forward_hook({});
  BOOST_TEST(!fc->has_forward_hook());
  BOOST_TEST(net(x).value().to_vector() == plain.to_vector(), boost::test_tools::per_element());
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_SUITE_END()
