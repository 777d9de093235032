#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::CpuVars;
using test::Emulated;
using test::emulated;

BOOST_AUTO_TEST_SUITE(shape_test)

namespace {
bool message_has(const Error& e, const std::string& part) {
  return std::string(e.what()).find(part) != std::string::npos;
}
// Element (i0, i1, i2, i3) of a 4D row-major tensor.
double at(const Tensor<double>& t, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
  const Shape& s = t.shape();
  return t[((i0 * s[1] + i1) * s[2] + i2) * s[3] + i3];
}
}  // namespace

BOOST_AUTO_TEST_CASE(reshape_is_a_view_with_an_inferred_extent) {
  Var<double> x(random_tensor({2, 3, 4}, 1));
  auto y = reshape(x, {4, -1});
  BOOST_TEST(y.shape() == (Shape{4, 6}));
  BOOST_TEST(y.value().shares_storage_with(x.value()));
  BOOST_TEST(y.value().to_vector() == x.value().to_vector());
  BOOST_TEST(reshape(x, Shape{24}).shape() == Shape{24});
}

BOOST_AUTO_TEST_CASE(reshape_gradient) {
  auto r = gradcheck([](const auto& v) { return reshape(v[0], {3, 8}); }, {random_tensor({2, 3, 4}, 2)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(reshape_to_another_count_is_an_error) {
  Var<double> x(random_tensor({2, 3}, 1));
  BOOST_CHECK_EXCEPTION(reshape(x, Shape{4, 2}), Error, [](const Error& e) {
    return message_has(e, "shape [2, 3] (6 elements) cannot become [4, 2]");
  });
  BOOST_CHECK_THROW(reshape(x, {4, -1}), Error);
}

BOOST_AUTO_TEST_CASE(flatten_merges_from_start_dim_to_the_end) {
  Var<double> x(random_tensor({2, 3, 4, 5}, 1));
  BOOST_TEST(flatten(x).shape() == (Shape{2, 60}));
  BOOST_TEST(flatten(x, 0).shape() == Shape{120});
  BOOST_TEST(flatten(x, 2).shape() == (Shape{2, 3, 20}));
  BOOST_TEST(flatten(x, -1).shape() == (Shape{2, 3, 4, 5}));
  BOOST_TEST(flatten(x).value().shares_storage_with(x.value()));
  BOOST_TEST(flatten(Var<double>(Tensor<double>::full(Shape{}, 3.0)), 0).shape() == Shape{1});
  BOOST_CHECK_EXCEPTION(flatten(x, 4), Error, [](const Error& e) {
    return message_has(e, "flatten: dimension 4 is out of range for a tensor of shape [2, 3, 4, 5]");
  });
}

BOOST_AUTO_TEST_CASE(flatten_gradient) {
  auto r = gradcheck([](const auto& v) { return flatten(v[0]); }, {random_tensor({2, 3, 2, 2}, 3)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(concat_places_each_input_along_the_dimension) {
  const auto a = random_tensor({2, 3, 2, 2}, 1), b = random_tensor({2, 1, 2, 2}, 2),
             c = random_tensor({2, 2, 2, 2}, 3);
  const auto y = concat<double>({Var<double>(a), Var<double>(b), Var<double>(c)}, 1).value();
  BOOST_TEST(y.shape() == (Shape{2, 6, 2, 2}));
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t w = 0; w < 2; ++w) {
        for (std::int64_t k = 0; k < 3; ++k) BOOST_TEST(at(y, n, k, h, w) == at(a, n, k, h, w));
        BOOST_TEST(at(y, n, 3, h, w) == at(b, n, 0, h, w));
        for (std::int64_t k = 0; k < 2; ++k) BOOST_TEST(at(y, n, 4 + k, h, w) == at(c, n, k, h, w));
      }
  const auto rows = concat<double>({Var<double>(a), Var<double>(a.slice(0, 1))}, 0).value();
  BOOST_TEST(rows.shape() == (Shape{3, 3, 2, 2}));
  std::vector<double> expected = a.to_vector();
  const auto first = a.slice(0, 1).to_vector();
  expected.insert(expected.end(), first.begin(), first.end());
  BOOST_TEST(rows.to_vector() == expected);
}

BOOST_AUTO_TEST_CASE(concat_gradient_along_dims_0_1_and_last_of_4d) {
  auto dim0 = gradcheck(
      [](const auto& v) {
        return concat<double>({v[0], v[1]}, 0);
      },
      {random_tensor({2, 3, 2, 2}, 1), random_tensor({1, 3, 2, 2}, 2)});
  BOOST_TEST(dim0.ok, dim0.report);
  auto dim1 = gradcheck(
      [](const auto& v) {
        return concat<double>({v[0], v[1], v[2]}, 1);
      },
      {random_tensor({2, 3, 2, 2}, 3), random_tensor({2, 1, 2, 2}, 4), random_tensor({2, 2, 2, 2}, 5)});
  BOOST_TEST(dim1.ok, dim1.report);
  auto last = gradcheck(
      [](const auto& v) {
        return concat<double>({v[0], v[1]}, -1);
      },
      {random_tensor({2, 2, 2, 3}, 6), random_tensor({2, 2, 2, 1}, 7)});
  BOOST_TEST(last.ok, last.report);
}

BOOST_AUTO_TEST_CASE(concat_gradient_reaches_only_inputs_that_need_it) {
  Var<double> a(random_tensor({2, 2}, 1), true), b(random_tensor({2, 3}, 2), false);
  auto y = concat<double>({a, b}, 1);
  Tensor<double> g = random_tensor({2, 5}, 3);
  backward(y, g);
  BOOST_TEST(!b.grad().defined());
  const std::vector<double> expected{g[0], g[1], g[5], g[6]};
  BOOST_TEST(a.grad().to_vector() == expected);
}

BOOST_AUTO_TEST_CASE(concat_of_large_tensors_matches_elementwise_placement) {
  // Big enough to copy rows on several threads.
  const auto a = random_tensor({8, 16, 32, 32}, 1), b = random_tensor({8, 8, 32, 32}, 2);
  const auto y = concat<double>({Var<double>(a), Var<double>(b)}, 1).value();
  bool same = true;
  for (std::int64_t n = 0; n < 8 && same; ++n)
    for (std::int64_t k = 0; k < 24 && same; ++k)
      for (std::int64_t i = 0; i < 32 * 32; ++i)
        same = same && y[(n * 24 + k) * 1024 + i] ==
                           (k < 16 ? a[(n * 16 + k) * 1024 + i] : b[(n * 8 + k - 16) * 1024 + i]);
  BOOST_TEST(same);
}

BOOST_AUTO_TEST_CASE(concat_of_mismatched_shapes_is_an_error) {
  Var<double> a(random_tensor({2, 3}, 1)), b(random_tensor({3, 3}, 2)), c(random_tensor({2, 3, 1}, 3));
  BOOST_CHECK_EXCEPTION(concat<double>({a, b}, 1), Error, [](const Error& e) {
    return message_has(
        e,
        "concat: input 1 has shape [3, 3], which does not match input 0's shape [2, 3] outside dimension 1");
  });
  BOOST_CHECK_THROW(concat<double>({a, c}, 0), Error);
  BOOST_CHECK_THROW(concat<double>({a, b}, 2), Error);
  BOOST_CHECK_THROW(concat<double>({}, 0), Error);
  BOOST_TEST(concat({a, b}, 0).shape() == (Shape{5, 3}));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(reshape_and_flatten_are_views_with_the_cpu_gradients, D, test::Devices) {
  const std::vector<Tensor<double>> inputs{random_tensor({2, 3, 2, 2}, 3)};
  // Multiplied by a weight afterwards, so the gradient handed back through the view is not all ones.
  const auto cpu = [](const CpuVars& v) { return relu(reshape(flatten(v[0]), {4, -1})); };
  const auto emulated = [](const auto& v) { return relu(reshape(flatten(v[0]), {4, -1})); };
  test::expect_gradcheck_on<D>(emulated, inputs);
  test::check_matches_cpu_on<D>(cpu, emulated, inputs);
  const Var<double, D> x(on_device<D>(inputs[0].clone()), true);
  const Var<double, D> flat = flatten(x, 2);
  BOOST_TEST(flat.shape() == Shape({2, 3, 4}));
  BOOST_TEST(flat.value().shares_storage_with(x.value()));
  BOOST_TEST(reshape(x, Shape{6, 4}).value().shares_storage_with(x.value()));
}

BOOST_AUTO_TEST_CASE(permute_reorders_dimensions_as_torch) {
  Tensor<double> x({2, 3, 4});
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<double>(i);
  const Tensor<double> y = permute(Var<double>(x), {2, 0, 1}).value();
  BOOST_REQUIRE(y.shape() == (Shape{4, 2, 3}));
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t c = 0; c < 4; ++c) BOOST_TEST(y[(c * 2 + a) * 3 + b] == x[(a * 3 + b) * 4 + c]);
  const Tensor<double> t = transpose(Var<double>(x), 0, -1).value();
  BOOST_REQUIRE(t.shape() == (Shape{4, 3, 2}));
  BOOST_TEST(t[(1 * 3 + 2) * 2 + 1] == x[(1 * 3 + 2) * 4 + 1]);
  BOOST_TEST(test::error_message([&] { (void)permute(Var<double>(x), {0, 0, 1}); })
                 .find("permute: dimension 0 appears twice") != std::string::npos);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(permute_matches_finite_differences_and_the_cpu, D, test::Devices) {
  test::check_op<D>([](const auto& v) { return permute(v[0], {1, 3, 0, 2}); }, {random_tensor({2, 3, 2, 4}, 5)});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(concat_matches_the_cpu_along_each_dimension, D, test::Devices) {
  // Along dim 0 each input's gradient is a view of the output's; along the others, a copy.
  test::check_op<D>([](const auto& v) { return concat({v[0], v[1], v[2]}, 0); },
           {random_tensor({2, 3, 2}, 31), random_tensor({1, 3, 2}, 32), random_tensor({3, 3, 2}, 33)});
  test::check_op<D>([](const auto& v) { return concat({v[0], v[1]}, 1); },
           {random_tensor({2, 3, 2}, 34), random_tensor({2, 1, 2}, 35)});
  test::check_op<D>([](const auto& v) { return concat({v[0], v[1], v[0]}, -1); },
           {random_tensor({2, 3, 2}, 36), random_tensor({2, 3, 4}, 37)});
  const Tensor<double> a = random_tensor({2, 3}, 38), b = random_tensor({3, 3}, 39);
  test::expect_same_error<D>([&] { (void)concat({Var<double>(a), Var<double>(b)}, 1); },
                    [&] { (void)concat({emulated(a), emulated(b)}, 1); });
}

BOOST_AUTO_TEST_SUITE_END()
