#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/models/inception.hpp>

#include "../common/torchvision_models.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(inception_test)

BOOST_AUTO_TEST_CASE(with_aux_logits_matches_torchvision_and_gives_them_in_training_only) {
  auto net = inception_v3<float>({.num_classes = 1000, .aux_logits = true});
  BOOST_TEST(net->parameter_count() == 27161264);
  test::expect_torchvision_parameters(*net, "inception_v3_names.txt");

  BOOST_TEST(!net->aux_logits().defined());
  const Var<float> x(test::deterministic_input({2, 3, 299, 299}));
  net->train();
  BOOST_TEST(net->forward(x).shape() == (Shape{2, 1000}));
  BOOST_REQUIRE(net->aux_logits().defined());
  BOOST_TEST(net->aux_logits().shape() == (Shape{2, 1000}));
  net->eval();
  BOOST_TEST(net->forward(x).shape() == (Shape{2, 1000}));
  BOOST_TEST(!net->aux_logits().defined());
}

BOOST_AUTO_TEST_CASE(without_aux_logits_matches_torchvision_and_computes_what_pytorch_computes) {
  auto net = inception_v3<float>({.aux_logits = false});
  BOOST_TEST(net->parameter_count() == 23834568);
  test::expect_torchvision_parameters(*net, "inception_v3_no_aux_names.txt");

  net->eval();
  test::fill_deterministic(*net);
  const Var<float> y = net->forward(Var<float>(test::deterministic_input({1, 3, 299, 299})));
  BOOST_TEST(y.shape() == (Shape{1, 1000}));
  test::expect_logits(y.value(), {-1.064251f, 0.4390511f, 0.133192f, -0.9586199f, 1.064454f, -1.090972f, 0.4065246f,
                                  0.2443239f, -0.8746805f, 1.215438f});
  BOOST_TEST(!net->aux_logits().defined());
}

// Blocks with few input channels in double: the branches, their concatenation and the pools pass
// the finite-difference check (batch norm in eval, so each image stands alone).
BOOST_AUTO_TEST_CASE(block_gradients) {
  manual_seed(31);
  InceptionE<double> e(3);
  InceptionB<double> b(3);
  e.eval();
  b.eval();
  auto r = gradcheck([&](const auto& v) { return e.forward(v[0]); }, {random_tensor({1, 3, 2, 2}, 32)});
  BOOST_TEST(r.ok, "InceptionE: " << r.report);
  r = gradcheck([&](const auto& v) { return b.forward(v[0]); }, {random_tensor({1, 3, 3, 3}, 33)});
  BOOST_TEST(r.ok, "InceptionB: " << r.report);
}

BOOST_AUTO_TEST_SUITE_END()
