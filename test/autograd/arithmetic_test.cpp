#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/shape.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::CpuVars;

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

BOOST_AUTO_TEST_CASE(scale_values_and_gradient) {
  Var<float> x(Tensor<float>::from({2}, {1.5f, -2.f}));
  BOOST_TEST((x * 0.5).value().to_vector() == (std::vector<float>{0.75f, -1.f}));
  BOOST_TEST((3.0 * x).value().to_vector() == (std::vector<float>{4.5f, -6.f}));
  auto r = gradcheck([](const auto& v) { return scale(v[0], -0.7); }, {random_tensor({2, 3}, 1)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(add_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({3, 4, 5}, 1), random_tensor({3, 4, 5}, 2)};
  test::expect_gradcheck_on<D>([](const auto& v) { return add(v[0], v[1]); }, inputs);
  test::check_matches_cpu_on<D>([](const CpuVars& v) { return v[0] + v[1]; }, [](const auto& v) { return v[0] + v[1]; },
                    inputs);
  // x + x: both gradients land on one input, the shared one copied before the second is added.
  test::check_matches_cpu_on<D>([](const CpuVars& v) { return add(v[0], v[0]); },
                    [](const auto& v) { return add(v[0], v[0]); }, {inputs[0]});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(shapes_that_do_not_broadcast_are_an_error, D, test::Devices) {
  const Var<double, D> a(on_device<D>(Tensor<double>::zeros({2, 3}))), b(on_device<D>(Tensor<double>::zeros({3, 2})));
  for (const auto& [op, name] : {std::pair{&add<double, D>, "add"}, std::pair{&sub<double, D>, "sub"},
                                 std::pair{&mul<double, D>, "mul"}, std::pair{&div<double, D>, "div"}}) {
    const std::string message = test::error_message([&] { (void)op(a, b); });
    BOOST_TEST(message.find(std::string(name) + ": shapes [2, 3] and [3, 2] do not broadcast (extent 2 against 3") !=
                   std::string::npos,
               message);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(broadcast_ops_give_the_hand_worked_values_and_gradients, D, test::Devices) {
  // a [2, 3] = [[1, 2, 3], [4, 5, 6]] against b [3] = [2, 4, 8], backward seeded with ones: b's
  // gradient sums over the rows it was repeated along.
  const Tensor<double> a = Tensor<double>::from({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor<double> b = Tensor<double>::from({3}, {2, 4, 8});
  struct Expected {
    Var<double, D> (*op)(const Var<double, D>&, const Var<double, D>&);
    std::vector<double> y, ga, gb;
  };
  const std::vector<Expected> cases{
      {&add<double, D>, {3, 6, 11, 6, 9, 14}, {1, 1, 1, 1, 1, 1}, {2, 2, 2}},
      {&sub<double, D>, {-1, -2, -5, 2, 1, -2}, {1, 1, 1, 1, 1, 1}, {-2, -2, -2}},
      {&mul<double, D>, {2, 8, 24, 8, 20, 48}, {2, 4, 8, 2, 4, 8}, {5, 7, 9}},
      // d(a / b)/db = -a / b^2, summed over the rows: -(1 + 4) / 4, -(2 + 5) / 16, -(3 + 6) / 64.
      {&div<double, D>, {0.5, 0.5, 0.375, 2, 1.25, 0.75}, {0.5, 0.25, 0.125, 0.5, 0.25, 0.125},
       {-1.25, -0.4375, -0.140625}},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    BOOST_TEST_CONTEXT("case " << c) {
      Var<double, D> va(on_device<D>(a.clone()), true), vb(on_device<D>(b.clone()), true);
      const Var<double, D> y = cases[c].op(va, vb);
      BOOST_TEST(y.shape() == (Shape{2, 3}));
      backward(y, on_device<D>(Tensor<double>::ones({2, 3})));
      BOOST_TEST(y.value().to_vector() == cases[c].y, boost::test_tools::per_element());
      BOOST_TEST(va.grad().to_vector() == cases[c].ga, boost::test_tools::per_element());
      BOOST_TEST(vb.grad().to_vector() == cases[c].gb, boost::test_tools::per_element());
    }
  }
  // [2, 1] * [1, 3] -> [2, 3]: both operands broadcast.
  Var<double, D> col(on_device<D>(Tensor<double>::from({2, 1}, {1, 2})), true);
  Var<double, D> row(on_device<D>(Tensor<double>::from({1, 3}, {3, 4, 5})), true);
  const Var<double, D> outer = col * row;
  backward(outer, on_device<D>(Tensor<double>::ones({2, 3})));
  BOOST_TEST(outer.value().to_vector() == (std::vector<double>{3, 4, 5, 6, 8, 10}), boost::test_tools::per_element());
  BOOST_TEST(col.grad().to_vector() == (std::vector<double>{12, 12}), boost::test_tools::per_element());
  BOOST_TEST(row.grad().to_vector() == (std::vector<double>{3, 3, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(broadcast_ops_match_finite_differences, D, test::Devices) {
  // Same shapes, a trailing operand, a leading one, both broadcast, and a scalar.
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{2, 3}, {2, 3}}, {{2, 3, 4}, {3, 1}}, {{4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}}, {{2, 3}, {}}};
  std::uint64_t seed = 10;
  for (const auto& [sa, sb] : shapes) {
    BOOST_TEST_CONTEXT("shapes " << sa << " and " << sb) {
      // Divisors kept away from 0.
      const std::vector<Tensor<double>> inputs{random_tensor(sa, ++seed), random_tensor(sb, ++seed, 0.5, 2)};
      test::check_op<D>([](const auto& v) { return add(v[0], v[1]); }, inputs);
      test::check_op<D>([](const auto& v) { return sub(v[0], v[1]); }, inputs);
      test::check_op<D>([](const auto& v) { return mul(v[0], v[1]); }, inputs);
      test::check_op<D>([](const auto& v) { return div(v[0], v[1]); }, inputs);
      test::check_op<D>([](const auto& v) { return v[1] / v[0] - v[1] * v[1]; }, {inputs[1], inputs[0]});
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(scale_matches_the_cpu_and_finite_differences, D, test::Devices) {
  test::check_op<D>([](const auto& v) { return scale(v[0], 2.5) + (-0.5) * v[0] + v[0] * 3.0; }, {random_tensor({4, 5}, 30)});
}

BOOST_AUTO_TEST_SUITE_END()
