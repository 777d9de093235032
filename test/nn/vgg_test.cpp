#include <boost/test/unit_test.hpp>

#include <ptrain/models/vgg.hpp>

#include "../common/torchvision_models.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(vgg_test)

BOOST_AUTO_TEST_CASE(vgg16_matches_torchvision) {
  auto net = vgg16<float>();
  BOOST_TEST(net->parameter_count() == 138357544);
  test::expect_torchvision_parameters(*net, "vgg16_names.txt");
}

// Names and output on one instance (each VGG-16 is 138M parameters to initialise).
BOOST_AUTO_TEST_CASE(vgg16_bn_matches_torchvision_and_computes_what_pytorch_computes) {
  auto net = vgg16_bn<float>();
  BOOST_TEST(net->parameter_count() == 138365992);
  test::expect_torchvision_parameters(*net, "vgg16_bn_names.txt");

  net->eval();
  test::fill_deterministic(*net);
  // The 1x1 feature map is spread to 7x7 by the adaptive pool, as in torchvision.
  const Var<float> y = net->forward(Var<float>(test::deterministic_input({1, 3, 32, 32})));
  BOOST_TEST(y.shape() == (Shape{1, 1000}));
  test::expect_logits(y.value(), {0.7038849f, -2.820349f, -2.464695f, 1.303273f, 3.207249f, 0.6059504f, -2.783979f,
                                  -2.141475f, 1.647321f, 3.237375f});
}

BOOST_AUTO_TEST_CASE(vgg_f_narrows_its_classifier_as_documented) {
  auto net = vgg_f<float>({.num_classes = 10});
  // 25088 -> 4096 -> 4096 -> 1024 -> 256 -> 10 at classifier.0, .3, .6, .9, .12; features as VGG-16.
  const std::vector<std::pair<std::string, Shape>> head{{"classifier.0.weight", {4096, 25088}},
                                                        {"classifier.3.weight", {4096, 4096}},
                                                        {"classifier.6.weight", {1024, 4096}},
                                                        {"classifier.9.weight", {256, 1024}},
                                                        {"classifier.12.weight", {10, 256}}};
  std::vector<std::pair<std::string, Shape>> got;
  std::int64_t features = 0;
  for (auto& [name, p] : net->named_parameters()) {
    if (name.starts_with("features."))
      features += p.numel();
    else if (name.ends_with(".weight"))
      got.emplace_back(name, p.shape());
  }
  BOOST_REQUIRE(got.size() == head.size());
  for (std::size_t i = 0; i < head.size(); ++i) {
    BOOST_TEST(got[i].first == head[i].first);
    BOOST_TEST(got[i].second == head[i].second, got[i].first);
  }
  BOOST_TEST(features == 14714688);  // VGG-16's convolutions

  net->train();
  const Var<float> y = net->forward(Var<float>(test::deterministic_input({2, 3, 32, 32})));
  BOOST_TEST(y.shape() == (Shape{2, 10}));
}

BOOST_AUTO_TEST_SUITE_END()
