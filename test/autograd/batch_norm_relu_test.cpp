#include <boost/test/unit_test.hpp>

#include <span>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::relative_difference;

BOOST_AUTO_TEST_SUITE(batch_norm_relu_test)

namespace {

// The fused ops, given [x, weight, bias, residual] (the residual absent: batch_norm_relu).
template <class V, class S>
V fused(const std::vector<V>& v, S& mean, S& var, bool training) {
  return v.size() > 3 ? batch_norm_add_relu(v[0], v[3], v[1], v[2], mean, var, training, 0.2)
                      : batch_norm_relu(v[0], v[1], v[2], mean, var, training, 0.2);
}
// The sequence they replace: batch_norm, then add, then relu.
template <class V, class S>
V unfused(const std::vector<V>& v, S& mean, S& var, bool training) {
  const V y = batch_norm(v[0], v[1], v[2], mean, var, training, 0.2);
  return relu(v.size() > 3 ? add(y, v[3]) : y);
}

std::vector<Tensor<double>> fused_inputs(const Shape& shape, bool with_residual, std::uint64_t seed) {
  const std::int64_t C = shape[1];
  std::vector<Tensor<double>> inputs{random_tensor(shape, seed, -2, 3), random_tensor({C}, seed + 1, 0.5, 1.5),
                                     random_tensor({C}, seed + 2)};
  if (with_residual) inputs.push_back(random_tensor(shape, seed + 3));
  return inputs;
}

}  // namespace

// x, weight, bias and residual gradients of both fused ops against finite differences in double,
// in training and evaluation, [N, C, H, W] and [N, C].
BOOST_AUTO_TEST_CASE_TEMPLATE(fused_ops_match_finite_differences, D, test::Devices) {
  for (const Shape& shape : {Shape{3, 4, 3, 2}, Shape{6, 3}})
    for (bool training : {true, false})
      for (bool with_residual : {false, true}) {
        BOOST_TEST_CONTEXT("input " << shape << ", training " << training << ", residual " << with_residual) {
          const std::int64_t C = shape[1];
          Tensor<double, D> mean = on_device<D>(random_tensor({C}, 7)),
                            var = on_device<D>(random_tensor({C}, 8, 0.5, 2));
          test::expect_gradcheck_on<D>([&](const auto& v) { return fused(v, mean, var, training); },
                                       fused_inputs(shape, with_residual, 10));
        }
      }
}

// In float, the fused op gives the unfused sequence's output, x, weight, bias and residual
// gradients and running statistics, within 1e-6 of the largest magnitude (rounding of the same
// float arithmetic in another order; they agree exactly on the CPU today).
BOOST_AUTO_TEST_CASE_TEMPLATE(fused_ops_match_batch_norm_add_relu_in_float, D, test::Devices) {
  constexpr double tol = 1e-6;
  for (const Shape& shape : {Shape{4, 5, 6, 7}, Shape{16, 8}})
    for (bool training : {true, false})
      for (bool with_residual : {false, true}) {
        BOOST_TEST_CONTEXT("input " << shape << ", training " << training << ", residual " << with_residual) {
          const std::int64_t C = shape[1];
          const auto as_float = [](const Tensor<double>& t) { return on_device<D>(tensor_cast<float>(t)); };
          Tensor<float, D> fused_mean = as_float(random_tensor({C}, 20)),
                           fused_var = as_float(random_tensor({C}, 21, 0.5, 2));
          Tensor<float, D> mean = fused_mean.clone(), var = fused_var.clone();
          std::vector<Var<float, D>> a, b;
          for (const Tensor<double>& t : fused_inputs(shape, with_residual, 30)) {
            a.emplace_back(as_float(t), true);
            b.emplace_back(as_float(t), true);
          }
          const Var<float, D> ya = fused(a, fused_mean, fused_var, training);
          const Var<float, D> yb = unfused(b, mean, var, training);
          BOOST_TEST(std::string(ya.node()->op) == (with_residual ? "batch_norm_add_relu" : "batch_norm_relu"));
          BOOST_TEST(relative_difference(ya.value().template to<Cpu>(), yb.value().template to<Cpu>()) <= tol);
          const Tensor<float, D> gy = as_float(random_tensor(shape, 40));
          backward(ya, gy.clone());
          backward(yb, gy.clone());
          for (std::size_t i = 0; i < a.size(); ++i)
            BOOST_TEST(relative_difference(a[i].grad().template to<Cpu>(), b[i].grad().template to<Cpu>()) <= tol,
                       "gradient of input " << i);
          BOOST_TEST(relative_difference(fused_mean.template to<Cpu>(), mean.template to<Cpu>()) <= tol);
          BOOST_TEST(relative_difference(fused_var.template to<Cpu>(), var.template to<Cpu>()) <= tol);
        }
      }
}

// Only some inputs need a gradient: each gets the unfused sequence's, the others none.
BOOST_AUTO_TEST_CASE_TEMPLATE(fused_op_gives_only_the_gradients_asked_for, D, test::Devices) {
  const Shape shape{4, 3, 3, 3};
  const auto inputs = fused_inputs(shape, true, 50);
  for (std::size_t wanted = 0; wanted < inputs.size(); ++wanted) {
    BOOST_TEST_CONTEXT("only input " << wanted) {
      Tensor<double, D> m1 = on_device<D>(Tensor<double>::zeros({3})), v1 = on_device<D>(Tensor<double>::ones({3}));
      Tensor<double, D> m2 = m1.clone(), v2 = v1.clone();
      std::vector<Var<double, D>> a, b;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        a.emplace_back(on_device<D>(inputs[i].clone()), i == wanted);
        b.emplace_back(on_device<D>(inputs[i].clone()), i == wanted);
      }
      backward(fused(a, m1, v1, true), on_device<D>(random_tensor(shape, 51)));
      backward(unfused(b, m2, v2, true), on_device<D>(random_tensor(shape, 51)));
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        BOOST_TEST(a[i].grad().defined() == (i == wanted));
        if (i == wanted)
          BOOST_TEST(relative_difference(a[i].grad().template to<Cpu>(), b[i].grad().template to<Cpu>()) <= 1e-12);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_residual_of_another_shape_is_an_error, D, test::Devices) {
  Tensor<double, D> mean = on_device<D>(Tensor<double>::zeros({3})), var = on_device<D>(Tensor<double>::ones({3}));
  const Var<double, D> x(on_device<D>(random_tensor({2, 3, 4, 4}, 1)), true);
  const Var<double, D> residual(on_device<D>(random_tensor({2, 3, 4, 5}, 2)), true);
  const std::string message =
      test::error_message([&] { batch_norm_add_relu(x, residual, Var<double, D>(), Var<double, D>(), mean, var, true); });
  BOOST_TEST(message.find("batch_norm_add_relu: residual [2, 3, 4, 5] for input [2, 3, 4, 4]") != std::string::npos,
             message);
}

// With a sync hook over a world of one (nothing to sum) the fused ops take the synchronised path,
// whose backward masks the gradient first: the same values, gradients and statistics as without.
BOOST_AUTO_TEST_CASE_TEMPLATE(synchronised_fused_ops_over_one_replica_are_the_local_ones, D, test::Devices) {
  const BatchNormSync alone = [](std::span<double>) {};
  for (bool with_residual : {false, true}) {
    BOOST_TEST_CONTEXT("residual " << with_residual) {
      const Shape shape{4, 3, 3, 2};
      const auto inputs = fused_inputs(shape, with_residual, 80);
      Tensor<double, D> m1 = on_device<D>(Tensor<double>::zeros({3})), v1 = on_device<D>(Tensor<double>::ones({3}));
      Tensor<double, D> m2 = m1.clone(), v2 = v1.clone();
      std::vector<Var<double, D>> a, b;
      for (const Tensor<double>& t : inputs) {
        a.emplace_back(on_device<D>(t.clone()), true);
        b.emplace_back(on_device<D>(t.clone()), true);
      }
      const Var<double, D> ya = with_residual
                                    ? batch_norm_add_relu(a[0], a[3], a[1], a[2], m1, v1, true, 0.2, 1e-5, alone)
                                    : batch_norm_relu(a[0], a[1], a[2], m1, v1, true, 0.2, 1e-5, alone);
      const Var<double, D> yb = fused(b, m2, v2, true);
      BOOST_TEST(relative_difference(ya.value().template to<Cpu>(), yb.value().template to<Cpu>()) <= 1e-12);
      backward(ya, on_device<D>(random_tensor(shape, 81)));
      backward(yb, on_device<D>(random_tensor(shape, 81)));
      for (std::size_t i = 0; i < a.size(); ++i)
        BOOST_TEST(relative_difference(a[i].grad().template to<Cpu>(), b[i].grad().template to<Cpu>()) <= 1e-12,
                   "gradient of input " << i);
      BOOST_TEST(relative_difference(m1.template to<Cpu>(), m2.template to<Cpu>()) <= 1e-12);
      BOOST_TEST(relative_difference(v1.template to<Cpu>(), v2.template to<Cpu>()) <= 1e-12);
    }
  }
}

// x, weight, bias and residual in half (the CPU widens to float, the indexed kernels accumulate
// in float): the float op's output, gradients and running statistics from the same values within
// 1e-2 of the largest magnitude (half's rounding of the results; no value of this input lies
// within half's rounding of relu's kink).
BOOST_AUTO_TEST_CASE_TEMPLATE(half_fused_op_follows_the_float_op, D, test::Devices) {
  const Shape shape{4, 3, 5, 5};
  std::vector<Var<half, D>> h;
  std::vector<Var<float, D>> f;
  for (const Tensor<double>& t : fused_inputs(shape, true, 90)) {
    h.emplace_back(on_device<D>(tensor_cast<half>(t)), true);
    f.emplace_back(on_device<D>(tensor_cast<float>(tensor_cast<half>(t))), true);
  }
  Tensor<half, D> half_mean = on_device<D>(Tensor<half>::zeros({3})), half_var = on_device<D>(Tensor<half>::ones({3}));
  Tensor<float, D> mean = on_device<D>(Tensor<float>::zeros({3})), var = on_device<D>(Tensor<float>::ones({3}));
  const Var<half, D> yh = fused(h, half_mean, half_var, true);
  const Var<float, D> yf = fused(f, mean, var, true);
  const auto widened = [](const Tensor<half, D>& t) { return tensor_cast<float>(t.template to<Cpu>()); };
  BOOST_TEST(relative_difference(widened(yh.value()), yf.value().template to<Cpu>()) <= 1e-2);
  const Tensor<double> gy = random_tensor(shape, 91);
  backward(yh, on_device<D>(tensor_cast<half>(gy)));
  backward(yf, on_device<D>(tensor_cast<float>(tensor_cast<half>(gy))));
  for (std::size_t i = 0; i < h.size(); ++i)
    BOOST_TEST(relative_difference(widened(h[i].grad()), f[i].grad().template to<Cpu>()) <= 1e-2,
               "gradient of input " << i);
  BOOST_TEST(relative_difference(widened(half_var), var.template to<Cpu>()) <= 1e-2);
}

BOOST_AUTO_TEST_SUITE_END()
