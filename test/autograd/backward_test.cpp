#include <boost/test/unit_test.hpp>

#include <memory>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(backward_test)

BOOST_AUTO_TEST_CASE(intermediate_held_by_nobody_survives_until_its_backward) {
  // relu(linear(...)): only the relu node refers to the linear node, and relu drops its inputs
  // before linear's backward runs.
  Var<double> x(Tensor<double>::from({1, 2}, {1, 2}), true);
  Var<double> w(Tensor<double>::from({3, 2}, {1, 0, 3, 4, -1, -1}), true);
  Var<double> b(Tensor<double>::from({3}, {0.5, -1, 0}), true);
  Var<double> y = relu(linear(x, w, b));
  std::weak_ptr<Node<double>> hidden = y.node()->inputs.at(0);
  backward(y, Tensor<double>::ones(y.shape()));
  // pre-activation [1.5, 10, -3]: the third unit passes no gradient.
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{4, 4}), boost::test_tools::per_element());
  BOOST_TEST(w.grad().to_vector() == (std::vector<double>{1, 2, 1, 2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(b.grad().to_vector() == (std::vector<double>{1, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(hidden.expired(), "the intermediate node is released once backward is done with it");
}

BOOST_AUTO_TEST_CASE(retain_graph_keeps_the_graph_for_a_second_pass) {
  Var<double> x(Tensor<double>::from({1, 2}, {1, 2}), true);
  Var<double> w(Tensor<double>::from({1, 2}, {3, -1}), true);
  Var<double> y = relu(linear(x, w));
  backward(y, Tensor<double>::ones(y.shape()), true);
  backward(y, Tensor<double>::ones(y.shape()));
  BOOST_TEST(w.grad().to_vector() == (std::vector<double>{2, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
