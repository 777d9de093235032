#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/models/squeezenet.hpp>

#include "../common/torchvision_models.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(squeezenet_test)

// On 67x67 every ceil_mode max-pool keeps a partial last window.
void check_against_torchvision(SqueezeNet<float>& net, std::int64_t parameters, const std::string& names,
                               const std::vector<float>& logits) {
  BOOST_TEST(net.parameter_count() == parameters);
  test::expect_torchvision_parameters(net, names);
  net.eval();
  test::fill_deterministic(net);
  const Var<float> y = net.forward(Var<float>(test::deterministic_input({1, 3, 67, 67})));
  BOOST_TEST(y.shape() == (Shape{1, 1000}));
  test::expect_logits(y.value(), logits);
}

BOOST_AUTO_TEST_CASE(squeezenet1_0_matches_torchvision) {
  check_against_torchvision(*squeezenet1_0<float>(), 1248424, "squeezenet1_0_names.txt",
                            {0, 0, 0, 0.3147186f, 0.4417058f, 0.1358225f, 0, 0, 0, 0.1753662f});
}

BOOST_AUTO_TEST_CASE(squeezenet1_1_matches_torchvision) {
  check_against_torchvision(*squeezenet1_1<float>(), 1235496, "squeezenet1_1_names.txt",
                            {0, 0, 0, 0.3175903f, 0.4424948f, 0.1338757f, 0, 0, 0, 0.1783476f});
}

BOOST_AUTO_TEST_CASE(fire_gradient) {
  manual_seed(21);
  Fire<double> fire(3, 2, 3, 4);
  auto r = gradcheck([&](const auto& v) { return fire.forward(v[0]); }, {random_tensor({2, 3, 5, 5}, 22)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(training_forward_gives_logits_per_image) {
  auto net = squeezenet1_1<float>({.num_classes = 7});
  net->train();
  BOOST_TEST(net->forward(Var<float>(test::deterministic_input({2, 3, 64, 64}))).shape() == (Shape{2, 7}));
}

BOOST_AUTO_TEST_SUITE_END()
