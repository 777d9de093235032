#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/nn/layers.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(layers_test)

BOOST_AUTO_TEST_CASE(sigmoid_module_is_the_op) {
  Sigmoid<double> layer;
  const Var<double> x(random_tensor({2, 3}, 1, -5, 5));
  BOOST_TEST(layer.named_parameters().empty());
  BOOST_TEST((layer.forward(x).value().array() == sigmoid(x).value().array()).all());
}

BOOST_AUTO_TEST_CASE(upsample_module_is_the_op_with_its_options) {
  const Var<double> x(random_tensor({2, 3, 4, 5}, 2));
  Upsample<double> nearest(2.0);
  BOOST_TEST(nearest.named_parameters().empty());
  BOOST_TEST(nearest.forward(x).shape() == (Shape{2, 3, 8, 10}));
  BOOST_TEST((nearest.forward(x).value().array() == upsample(x, UpsampleOptions::by_scale(2)).value().array()).all());
  const auto o = UpsampleOptions::to_size(7, 6, UpsampleMode::bilinear, true);
  Upsample<double> bilinear(o);
  BOOST_TEST((bilinear.forward(x).value().array() == upsample(x, o).value().array()).all());
  auto r = gradcheck([&](const auto& v) { return bilinear.forward(v[0]); }, {random_tensor({1, 2, 3, 3}, 3)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(upsample_module_checks_its_options_when_built) {
  BOOST_CHECK_THROW(Upsample<float>(2.0, UpsampleMode::nearest, true), Error);
  BOOST_CHECK_THROW(Upsample<float>(UpsampleOptions{}), Error);
  BOOST_CHECK_THROW(Upsample<float>(0.0), Error);
}

BOOST_AUTO_TEST_SUITE_END()
