// The zoo on a device: each model built for HostEmulated (the GPU algorithms on the host) from the
// same seed as its CPU twin holds the same weights, and one training-mode forward and backward
// gives the same scores and parameter gradients.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/models/inception.hpp>
#include <ptrain/models/small_cnn.hpp>
#include <ptrain/models/squeezenet.hpp>
#include <ptrain/models/unet.hpp>
#include <ptrain/models/vgg.hpp>

#include "../common/device_mlp.hpp"  // relative_difference

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(device_models_test)

namespace {

template <class T = float>
Tensor<T> random_images(Shape shape, std::uint64_t seed) {
  Rng rng(seed);
  Tensor<T> x(shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<T>(rng.normal());
  return x;
}

// Builds both models from one seed, runs each in training mode from one dropout seed, and
// compares weights, scores and every parameter's gradient of a cross-entropy over all positions.
template <template <class, class> class Model, class T = float>
void check_matches_cpu(const std::type_identity_t<std::function<std::shared_ptr<Model<T, Cpu>>()>>& make_cpu,
                       const std::type_identity_t<std::function<std::shared_ptr<Model<T, HostEmulated>>()>>& make_device,
                       const Tensor<T>& x, double tol = 1e-4) {
  manual_seed(21);
  auto cpu = make_cpu();
  manual_seed(21);
  auto device = make_device();
  const auto cp = cpu->named_parameters(), dp = device->named_parameters();
  BOOST_REQUIRE_EQUAL(cp.size(), dp.size());
  for (std::size_t i = 0; i < cp.size(); ++i) {
    BOOST_REQUIRE_EQUAL(cp[i].first, dp[i].first);
    BOOST_REQUIRE(test::relative_difference(dp[i].second.value().template to<Cpu>(), cp[i].second.value()) == 0.0);
  }

  manual_seed(5);
  const Var<T> y = cpu->forward(Var<T>(x));
  manual_seed(5);
  const Var<T, HostEmulated> yd = device->forward(Var<T, HostEmulated>(x.template to<HostEmulated>()));
  BOOST_TEST(test::relative_difference(yd.value().template to<Cpu>(), y.value()) <= tol);

  const std::int64_t classes = y.size(1), positions = y.numel() / classes;
  std::vector<std::int64_t> targets;
  for (std::int64_t i = 0; i < positions; ++i) targets.push_back(i % classes);
  backward(cross_entropy(y, targets));
  backward(cross_entropy(yd, targets));
  for (std::size_t i = 0; i < cp.size(); ++i) {
    BOOST_REQUIRE(dp[i].second.grad().defined());
    const double d = test::relative_difference(dp[i].second.grad().template to<Cpu>(), cp[i].second.grad());
    BOOST_TEST(d <= tol, "gradient of " << cp[i].first << " differs by " << d);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(small_cnn_with_dropout) {
  check_matches_cpu<SmallCnn>([] { return make<SmallCnn<float>>(); },
                              [] { return make<SmallCnn<float, HostEmulated>>(); },
                              random_images({3, 1, 28, 28}, 1));
}

BOOST_AUTO_TEST_CASE(vgg_with_batch_norm_and_dropout) {
  const std::vector<std::int64_t> config{8, vgg_pool, 16, vgg_pool};
  const VggOptions options{.num_classes = 6};
  const std::vector<std::int64_t> widths{32};
  check_matches_cpu<Vgg>([&] { return make<Vgg<float>>(config, true, widths, options); },
                         [&] { return make<Vgg<float, HostEmulated>>(config, true, widths, options); },
                         random_images({2, 3, 16, 16}, 2));
}

BOOST_AUTO_TEST_CASE(squeezenet_1_1) {
  check_matches_cpu<SqueezeNet>([] { return squeezenet1_1<float>({.num_classes = 7}); },
                                [] { return squeezenet1_1<float, HostEmulated>({.num_classes = 7}); },
                                random_images({2, 3, 48, 48}, 3));
}

BOOST_AUTO_TEST_CASE(unet_with_transposed_convolutions_and_skips) {
  const UNetOptions options{.in_channels = 3, .classes = 2, .levels = 3, .base_width = 4};
  check_matches_cpu<UNet>([&] { return make<UNet<float>>(options); },
                          [&] { return make<UNet<float, HostEmulated>>(options); }, random_images({2, 3, 16, 16}, 4));
}

BOOST_AUTO_TEST_CASE(inception_v3_without_the_auxiliary_head) {
  // Without the auxiliary head: its logits are not in this loss, so it would get no gradient. In
  // double: at 75 x 75 the last blocks batch-normalise two 1 x 1 values, which turns float's
  // rounding differences into different signs; in double the gradients agree to 7.4e-8.
  const InceptionV3Options options{.num_classes = 4, .aux_logits = false};
  check_matches_cpu<InceptionV3, double>([&] { return inception_v3<double>(options); },
                                         [&] { return inception_v3<double, HostEmulated>(options); },
                                         random_images<double>({2, 3, 75, 75}, 5), 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()
