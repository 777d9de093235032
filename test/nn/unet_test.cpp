#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/models/unet.hpp>

#include "../common/compare.hpp"

using namespace ptrain;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(unet_test)

namespace {
std::vector<std::string> parameter_names(const Module<double>& m) {
  std::vector<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}
double cos_weighted_sum(const Tensor<double>& y) {
  const Tensor<double> w = sequence(y.shape(), 0.1, 0.0, 1.0, true);
  return (y.array() * w.array()).sum();
}
}  // namespace

BOOST_AUTO_TEST_CASE(output_has_the_input_size_and_a_channel_per_class) {
  manual_seed(1);
  UNet<float> net;  // 5 levels, widths 16..256, one input channel, two classes
  Var<float> x(Tensor<float>::ones({1, 1, 64, 64}));
  BOOST_TEST(net.forward(x).shape() == (Shape{1, 2, 64, 64}));
  UNet<float> rgb(UNetOptions{.in_channels = 3, .classes = 4, .levels = 3, .base_width = 4, .batch_norm = false});
  BOOST_TEST(rgb.forward(Var<float>(Tensor<float>::zeros({2, 3, 12, 20}))).shape() == (Shape{2, 4, 12, 20}));
}

BOOST_AUTO_TEST_CASE(parameter_counts_match_pytorch) {
  // The equivalent PyTorch model (milesial's DoubleConv / Down / Up with ConvTranspose2d / OutConv,
  // widths base * 2^level): sum(p.numel() for p in model.parameters()).
  struct Expected {
    UNetOptions options;
    std::int64_t count;
    std::size_t tensors;
  };
  for (const Expected& e : std::vector<Expected>{
           {{.in_channels = 1, .classes = 2, .levels = 5, .base_width = 16, .batch_norm = true}, 1942306, 64},
           {{.in_channels = 1, .classes = 2, .levels = 5, .base_width = 16, .batch_norm = false}, 1940834, 46},
           {{.in_channels = 3, .classes = 4, .levels = 4, .base_width = 8, .batch_norm = true}, 121204, 50},
           // milesial's UNet(n_channels=3, n_classes=1, bilinear=False)
           {{.in_channels = 3, .classes = 1, .levels = 5, .base_width = 64, .batch_norm = true}, 31037633, 64},
       }) {
    UNet<float> net(e.options);
    BOOST_TEST(net.parameter_count() == e.count, "levels " << e.options.levels << " width " << e.options.base_width);
    BOOST_TEST(net.named_parameters().size() == e.tensors);
  }
}

BOOST_AUTO_TEST_CASE(names_match_the_pytorch_state_dict) {
  UNet<double> net(UNetOptions{.in_channels = 1, .classes = 2, .levels = 3, .base_width = 2, .batch_norm = true});
  std::vector<std::string> expected;
  auto double_conv = [&](const std::string& prefix) {
    for (const char* p : {"0.weight", "1.weight", "1.bias", "3.weight", "4.weight", "4.bias"})
      expected.push_back(prefix + "double_conv." + p);
  };
  double_conv("inc.");
  double_conv("down1.maxpool_conv.1.");
  double_conv("down2.maxpool_conv.1.");
  for (const char* up : {"up1.", "up2."}) {
    expected.push_back(std::string(up) + "up.weight");
    expected.push_back(std::string(up) + "up.bias");
    double_conv(std::string(up) + "conv.");
  }
  expected.push_back("outc.conv.weight");
  expected.push_back("outc.conv.bias");
  BOOST_TEST(parameter_names(net) == expected, boost::test_tools::per_element());
  const auto named = net.named_parameters();
  BOOST_TEST(named[18].second.shape() == (Shape{8, 4, 2, 2}));  // up1.up: 8 channels to 4, 2x2
  BOOST_TEST(named[20].second.shape() == (Shape{4, 8, 3, 3}));  // up1.conv: skip 4 + up 4 channels in
  BOOST_TEST(net.named_buffers().front().first == "inc.double_conv.1.running_mean");
  BOOST_TEST(net.named_buffers().size() == 30u);
}

BOOST_AUTO_TEST_CASE(forward_matches_pytorch_in_training_and_after_it) {
  // Parameters in named order k: 0.5 sin(0.37 i + 0.1 k), batch-norm weights 1 + that; input
  // 1.5 sin(0.9 i + 0.2) of [2, 2, 8, 8]; the PyTorch model in train() and then eval().
  UNet<double> net(UNetOptions{.in_channels = 2, .classes = 3, .levels = 3, .base_width = 4, .batch_norm = true});
  double k = 0;
  for (auto& [name, p] : net.named_parameters()) {
    Tensor<double> v = sequence(p.shape(), 0.37, 0.1 * k++, 0.5);
    if (p.shape().rank() == 1 && name.ends_with("weight")) v.array() += 1;
    p.value().array() = v.array();
  }
  const Var<double> x(sequence({2, 2, 8, 8}, 0.9, 0.2, 1.5));
  const Tensor<double> y = net.forward(x).value();
  BOOST_REQUIRE(y.shape() == (Shape{2, 3, 8, 8}));
  const std::vector<double> first{-0.42921289513343786, -0.18754374596070397, -0.17539161384480992,
                                  -0.17539161384480992, -0.17539161384480992, -0.17539161384480992,
                                  -0.31490234248749194, -0.4615978368010814};
  for (std::size_t i = 0; i < first.size(); ++i)
    BOOST_TEST(std::abs(y[static_cast<std::int64_t>(i)] - first[i]) < 1e-12, "element " << i);
  BOOST_TEST(std::abs(y.array().sum() - -165.36399439443286) < 1e-10);
  BOOST_TEST(std::abs(y.array().square().sum() - 102.23496349155624) < 1e-10);
  BOOST_TEST(std::abs(cos_weighted_sum(y) - -0.4863426285171948) < 1e-11);
  // Evaluation reads the running statistics that one training pass moved.
  net.eval();
  BOOST_TEST(std::abs(cos_weighted_sum(net.forward(x).value()) - -7.588334962078882) < 1e-10);
}

BOOST_AUTO_TEST_CASE(whole_model_gradients_match_finite_differences) {
  manual_seed(3);
  for (bool batch_norm : {true, false}) {
    BOOST_TEST_CONTEXT("batch_norm " << batch_norm) {
      UNet<double> net(
          UNetOptions{.in_channels = 1, .classes = 2, .levels = 3, .base_width = 2, .batch_norm = batch_norm});
      const Tensor<double> x = random_tensor({2, 1, 8, 8}, 4);
      auto input = gradcheck([&](const auto& v) { return net.forward(v[0]); }, {x});
      BOOST_TEST(input.ok, input.report);
      auto parameters = gradcheck_parameters([&] { return net.forward(Var<double>(x)); }, net.named_parameters());
      BOOST_TEST(parameters.ok, parameters.report);
    }
  }
}

BOOST_AUTO_TEST_CASE(trains_with_per_pixel_cross_entropy) {
  // Two steps of plain gradient descent on one image lower the per-pixel loss.
  manual_seed(5);
  UNet<double> net(UNetOptions{.in_channels = 1, .classes = 2, .levels = 2, .base_width = 4, .batch_norm = true});
  const Tensor<double> x = random_tensor({2, 1, 8, 8}, 6);
  std::vector<std::int64_t> mask(2 * 8 * 8);
  for (std::int64_t i = 0; i < 128; ++i) mask[static_cast<std::size_t>(i)] = x[i] > 0 ? 1 : 0;
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    net.zero_grad();
    const Var<double> loss = cross_entropy(net.forward(Var<double>(x)), mask);
    losses.push_back(loss.value()[0]);
    backward(loss);
    for (auto& [name, p] : net.named_parameters()) p.value().array() -= 0.1 * p.grad().array();
  }
  BOOST_TEST(losses[2] < losses[0]);
}

BOOST_AUTO_TEST_CASE(bad_inputs_and_options_are_errors) {
  UNet<float> net(UNetOptions{.levels = 3, .base_width = 2});
  BOOST_CHECK_EXCEPTION(net.forward(Var<float>(Tensor<float>::zeros({1, 1, 10, 8}))), Error, [](const Error& e) {
    return std::string(e.what()).find("not divisible by 4 = 2^(levels - 1)") != std::string::npos;
  });
  BOOST_CHECK_EXCEPTION(net.forward(Var<float>(Tensor<float>::zeros({1, 3, 8, 8}))), Error, [](const Error& e) {
    return std::string(e.what()).find("UNet: input must be [N, 1, H, W], got [1, 3, 8, 8]") != std::string::npos;
  });
  BOOST_CHECK_THROW(UNet<float>(UNetOptions{.levels = 0}), Error);
  BOOST_CHECK_THROW(UNetUp<float>(4, 2, true).forward(Var<float>(Tensor<float>::zeros({1, 4, 2, 2}))), Error);
}

BOOST_AUTO_TEST_SUITE_END()
