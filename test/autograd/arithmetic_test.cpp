#include <boost/test/unit_test.hpp>

#include <string>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(arithmetic_test)

BOOST_AUTO_TEST_CASE(add_values_and_gradient) {
  Var<double> a(Tensor<double>::from({3}, {1, 2, 3})), b(Tensor<double>::from({3}, {10, 20, 30}));
  BOOST_TEST((a + b).value().to_vector() == (std::vector<double>{11, 22, 33}));
  auto r = gradcheck([](const auto& v) { return add(v[0], v[1]); },
                     {random_tensor({2, 3}, 1), random_tensor({2, 3}, 2)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(adding_a_variable_to_itself_doubles_its_gradient) {
  // Both inputs of add share one gradient tensor: accumulating the second into the first must
  // not write into the shared one.
  Var<double> x(random_tensor({4}, 1), true);
  auto y = x + x;
  Tensor<double> g = random_tensor({4}, 2);
  const auto g_copy = g.to_vector();
  backward(y, g);
  for (std::int64_t i = 0; i < 4; ++i) BOOST_TEST(x.grad()[i] == 2 * g_copy[static_cast<std::size_t>(i)]);
  BOOST_TEST(g.to_vector() == g_copy);
}

BOOST_AUTO_TEST_CASE(add_of_different_shapes_is_an_error) {
  Var<double> a(random_tensor({2, 3}, 1)), b(random_tensor({3, 2}, 2));
  BOOST_CHECK_EXCEPTION(add(a, b), Error, [](const Error& e) {
    return std::string(e.what()).find("add: shapes [2, 3] and [3, 2] differ") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(scale_values_and_gradient) {
  Var<float> x(Tensor<float>::from({2}, {1.5f, -2.f}));
  BOOST_TEST((x * 0.5).value().to_vector() == (std::vector<float>{0.75f, -1.f}));
  BOOST_TEST((3.0 * x).value().to_vector() == (std::vector<float>{4.5f, -6.f}));
  auto r = gradcheck([](const auto& v) { return scale(v[0], -0.7); }, {random_tensor({2, 3}, 1)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_SUITE_END()
