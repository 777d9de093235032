#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include <ptrain/nn/conv.hpp>

#include "../common/compare.hpp"

using namespace ptrain;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(conv_test)

namespace {
// The largest |element| of a tensor.
double largest(const Tensor<float>& t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(static_cast<double>(t[i])));
  return m;
}
}  // namespace

BOOST_AUTO_TEST_CASE(conv2d_default_options_are_pytorchs) {
  // GCC 12.2 at -O2 -march=native built a by-value default Conv2dOptions with pad_h = 1 in some
  // callers (UNet's 1x1 output convolution; unet_test catches that one).
  Conv2d<float> conv(4, 2, 1);
  const Conv2dOptions& o = conv.options();
  BOOST_TEST((o.stride_h == 1 && o.stride_w == 1 && o.pad_h == 0 && o.pad_w == 0 && o.dilation_h == 1 &&
              o.dilation_w == 1 && o.groups == 1));
  BOOST_TEST(conv.forward(Var<float>(Tensor<float>::zeros({2, 4, 5, 3}))).shape() == (Shape{2, 2, 5, 3}));
  ConvTranspose2d<float> up(4, 2, 3);
  const ConvTranspose2dOptions& t = up.options();
  BOOST_TEST((t.stride_h == 1 && t.stride_w == 1 && t.pad_h == 0 && t.pad_w == 0 && t.output_pad_h == 0 &&
              t.output_pad_w == 0 && t.dilation_h == 1 && t.dilation_w == 1 && t.groups == 1));
  BOOST_TEST(up.forward(Var<float>(Tensor<float>::zeros({2, 4, 5, 3}))).shape() == (Shape{2, 2, 7, 5}));
}

BOOST_AUTO_TEST_CASE(conv_transpose2d_has_pytorchs_parameters) {
  ConvTranspose2d<float> up(64, 32, 2, ConvTranspose2dOptions::square(2));
  const auto named = up.named_parameters();
  BOOST_REQUIRE_EQUAL(named.size(), 2u);
  BOOST_TEST(named[0].first == "weight");
  BOOST_TEST(named[0].second.shape() == (Shape{64, 32, 2, 2}));
  BOOST_TEST(named[1].first == "bias");
  BOOST_TEST(named[1].second.shape() == (Shape{32}));
  BOOST_TEST(up.forward(Var<float>(Tensor<float>::zeros({1, 64, 4, 5}))).shape() == (Shape{1, 32, 8, 10}));
  ConvTranspose2d<float> grouped(4, 6, 3, 2, ConvTranspose2dOptions::square(1, 0, 0, 1, 2), false);
  BOOST_TEST(grouped.weight.shape() == (Shape{4, 3, 3, 2}));
  BOOST_TEST(!grouped.bias.defined());
  BOOST_TEST(grouped.named_parameters().size() == 1u);
}

BOOST_AUTO_TEST_CASE(conv_transpose2d_initialises_as_pytorch) {
  // nn.ConvTranspose2d draws weight and bias from U(±1/sqrt(fan_in)) with fan_in = weight.size(1) *
  // kh * kw = out_channels / groups * kh * kw (here 64 * 4, not the 4 * 4 of the input channels).
  manual_seed(3);
  ConvTranspose2d<float> up(4, 64, 2);
  const double bound = 1.0 / std::sqrt(64.0 * 4.0);
  BOOST_TEST(largest(up.weight.value()) <= bound);
  BOOST_TEST(largest(up.weight.value()) > 0.95 * bound);  // 1024 draws reach the edge
  BOOST_TEST(largest(up.bias.value()) <= bound);
  BOOST_TEST(largest(up.bias.value()) > 0.8 * bound);  // 64 draws come near it
}

BOOST_AUTO_TEST_CASE(bad_sizes_are_errors_naming_the_layer) {
  const std::string groups =
      error_message([] { ConvTranspose2d<float>(4, 3, 2, ConvTranspose2dOptions::square(1, 0, 0, 1, 2)); });
  BOOST_TEST(groups.find("ConvTranspose2d: in_channels 4 and out_channels 3 must divide by groups 2") !=
                 std::string::npos,
             groups);
  const std::string empty = error_message([] { Conv2d<float>(0, 3, 3); });
  BOOST_TEST(empty.find("Conv2d: sizes must be positive") != std::string::npos, empty);
}

BOOST_AUTO_TEST_SUITE_END()
