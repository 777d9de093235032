// The executor-generic losses (kernels/indexed/loss.hpp) run by the HostExecutor against the CPU
// cross-entropy kernels (kernels/cpu/cross_entropy.hpp) and the autograd ops of loss.hpp and
// accuracy.hpp: label smoothing, per-pixel scores, gradient scale, pos_weight broadcasting, ties.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/accuracy.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/kernels/cpu/cross_entropy.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/loss.hpp>

#include "reduction_checks.hpp"

using namespace ptrain;
using kernels::HostExecutor;
using kernels::ReductionLayout;
using test::expect_close;
using test::reduction_tolerance;
using test::uniform_values;
namespace ix = kernels::indexed;

BOOST_AUTO_TEST_SUITE(loss_kernels_test)

namespace {

std::vector<std::int64_t> random_targets(std::int64_t n, std::int64_t classes, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (auto& v : t) v = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
  return t;
}

template <class T>
void check_cross_entropy(const ReductionLayout& l, double eps, const char* type) {
  BOOST_TEST_CONTEXT(type << " [" << l.outer << ", " << l.n << ", " << l.inner << "] eps " << eps) {
    using A = accumulate_t<T>;
    const std::int64_t positions = l.outer * l.inner;
    const auto x = uniform_values<T>(l.numel(), 21, -3, 3);
    const auto targets = random_targets(positions, l.n, 22);
    const double sum_tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;  // float math on both sides
    const HostExecutor ex;

    std::vector<A> lse(positions), got_lse(positions);
    const double total = kernels::cross_entropy_forward(x.data(), targets.data(), lse.data(), l, eps);
    double got_total = 0;
    ix::cross_entropy_forward(ex, x.data(), targets.data(), got_lse.data(), l, eps, 1.0, &got_total);
    expect_close(got_lse, lse, sum_tol, "log-sum-exp");
    expect_close(&got_total, &total, 1, sum_tol * static_cast<double>(positions), "summed loss");

    const A scale = static_cast<A>(0.37);
    std::vector<T> want(l.numel()), got(l.numel());
    kernels::cross_entropy_backward(x.data(), targets.data(), lse.data(), scale, want.data(), l, eps);
    ix::cross_entropy_backward(ex, x.data(), targets.data(), lse.data(), scale, got.data(), l, eps);
    expect_close(got, want, reduction_tolerance<T>, "gradient");
  }
}

template <class T>
void check_cross_entropy_type(const char* type) {
  const std::vector<ReductionLayout> layouts{
      {6, 10, 1},    // [N, C]
      {2, 4, 15},    // [N, C, H, W]: rows folded per thread
      {3, 300, 2},   // many classes per pixel: a block per row
      {4100, 3, 1},  // many short rows
      {37, 2000, 1}, // the 16-bit types: several blocks of rows (widen.hpp's over_row_blocks)
      {2, 40000, 1}, // and rows longer than a block
      {3, 1, 1},     // one class
  };
  for (const auto& l : layouts)
    for (double eps : {0.0, 0.1, 1.0}) check_cross_entropy<T>(l, eps, type);
}

// The executor's chain against the op itself: the mean loss as T and the scaled gradient.
template <class T>
void check_cross_entropy_op(const Shape& shape, double eps, double grad_scale) {
  BOOST_TEST_CONTEXT("cross_entropy op " << shape << " eps " << eps << " grad_scale " << grad_scale) {
    const auto l = ReductionLayout::around(shape, 1);
    const std::int64_t positions = l.outer * l.inner;
    const auto xv = uniform_values<T>(l.numel(), 23, -3, 3);
    const auto targets = random_targets(positions, l.n, 24);
    Var<T> x(Tensor<T>::from(shape, xv), true);
    Var<T> loss = cross_entropy(x, std::span<const std::int64_t>(targets), eps, grad_scale);
    backward(loss);

    const HostExecutor ex;
    std::vector<accumulate_t<T>> lse(positions);
    T mean{};
    ix::cross_entropy_forward(ex, xv.data(), targets.data(), lse.data(), l, eps,
                              1.0 / static_cast<double>(positions), &mean);
    std::vector<T> gx(l.numel());
    ix::cross_entropy_backward(ex, xv.data(), targets.data(), lse.data(),
                               static_cast<accumulate_t<T>>(grad_scale / static_cast<double>(positions)), gx.data(),
                               l, eps);
    const double tol = reduction_tolerance<T>;
    expect_close(&mean, loss.value().data(), 1, tol, "mean loss");
    expect_close(gx, x.grad().to_vector(), tol, "gradient");
  }
}

template <class T>
void check_bce(const Shape& shape, const Shape& pw_shape) {
  BOOST_TEST_CONTEXT("bce " << shape << " pos_weight " << pw_shape) {
    const std::int64_t n = shape.numel();
    const bool weighted = pw_shape.rank() > 0;
    const auto xv = uniform_values<T>(n, 31, -4, 4), tv = uniform_values<T>(n, 32, 0, 1);
    Tensor<T> pw = weighted ? Tensor<T>::from(pw_shape, uniform_values<T>(pw_shape.numel(), 33, 0.5, 3)) : Tensor<T>();
    Var<T> x(Tensor<T>::from(shape, xv), true), t(Tensor<T>::from(shape, tv), true);
    Var<T> loss = binary_cross_entropy_with_logits(x, t, pw);
    backward(loss);

    const HostExecutor ex;
    const kernels::BroadcastIndex pw_at(weighted ? pw_shape : Shape{}, shape, "test");
    const T* pw_data = weighted ? pw.data() : nullptr;
    T mean{};
    ix::bce_with_logits_sum(ex, xv.data(), tv.data(), pw_data, pw_at, n, 1.0 / static_cast<double>(n), &mean);
    std::vector<T> gx(n), gt(n);
    ix::bce_with_logits_backward(ex, xv.data(), tv.data(), pw_data, pw_at, n,
                                 static_cast<accumulate_t<T>>(1.0 / static_cast<double>(n)), gx.data(), gt.data());
    const double tol = reduction_tolerance<T>;
    expect_close(&mean, loss.value().data(), 1, tol, "mean loss");
    expect_close(gx, x.grad().to_vector(), tol, "logit gradient");
    expect_close(gt, t.grad().to_vector(), tol, "target gradient");
  }
}

template <class T>
void check_accuracy(const Shape& shape, double levels) {
  BOOST_TEST_CONTEXT("argmax " << shape << " levels " << levels) {
    const auto l = ReductionLayout::around(shape, 1);
    const std::int64_t positions = l.outer * l.inner;
    // Few distinct values: many ties, which go to the first class.
    auto values = uniform_values<double>(shape.numel(), 41, 0, levels);
    std::vector<T> scores(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) scores[i] = static_cast<T>(std::floor(values[i]));
    const Tensor<T> tensor = Tensor<T>::from(shape, scores);
    const auto targets = random_targets(positions, l.n, 42);

    const HostExecutor ex;
    std::vector<std::int64_t> best(positions);
    ix::argmax_classes(ex, scores.data(), l, best.data());
    BOOST_TEST(best == argmax_classes(tensor), boost::test_tools::per_element());
    std::int64_t correct = -1;
    ix::top1_correct(ex, scores.data(), targets.data(), l, &correct);
    BOOST_TEST(correct == top1_correct(tensor, std::span<const std::int64_t>(targets)));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(cross_entropy_matches_cpu) {
  check_cross_entropy_type<double>("double");
  check_cross_entropy_type<float>("float");
  check_cross_entropy_type<ptrain::half>("half");
  check_cross_entropy_type<ptrain::bfloat16>("bfloat16");
}

BOOST_AUTO_TEST_CASE(cross_entropy_matches_the_op) {
  check_cross_entropy_op<double>(Shape{5, 7}, 0.0, 1.0);
  check_cross_entropy_op<double>(Shape{2, 3, 4, 5}, 0.2, 1.0);
  check_cross_entropy_op<float>(Shape{2, 6, 3, 3}, 0.1, 1024.0);
  check_cross_entropy_op<ptrain::half>(Shape{4, 5}, 0.1, 65536.0);  // the scale fp16 itself cannot hold
  check_cross_entropy_op<ptrain::bfloat16>(Shape{3, 4, 2, 2}, 0.0, 8.0);
}

BOOST_AUTO_TEST_CASE(bce_with_logits_matches_the_op) {
  check_bce<double>(Shape{4, 3}, Shape{});
  check_bce<double>(Shape{4, 3}, Shape{3});
  check_bce<double>(Shape{2, 3, 4, 5}, Shape{3, 1, 1});
  check_bce<float>(Shape{5000, 3}, Shape{3});  // several blocks of the two-stage sum
}

BOOST_AUTO_TEST_CASE(mse_matches_the_op) {
  for (std::int64_t n : {1, 37, 9000}) {
    const auto pv = uniform_values<double>(n, 51), tv = uniform_values<double>(n, 52);
    const Var<double> p(Tensor<double>::from(Shape{n}, pv)), t(Tensor<double>::from(Shape{n}, tv));
    double mean = 0;
    ix::mse_sum(HostExecutor{}, pv.data(), tv.data(), n, 1.0 / static_cast<double>(n), &mean);
    expect_close(&mean, mse_loss(p, t).value().data(), 1, 1e-12, "mse of " + std::to_string(n));
  }
}

BOOST_AUTO_TEST_CASE(argmax_and_top1_match_the_ops) {
  check_accuracy<float>(Shape{50, 10}, 3);
  check_accuracy<double>(Shape{3, 5, 4, 6}, 2);
  check_accuracy<double>(Shape{2, 400, 3}, 1000);
  check_accuracy<ptrain::half>(Shape{9, 4}, 2);
}

BOOST_AUTO_TEST_CASE(bad_layouts_are_rejected) {
  const HostExecutor ex;
  const float x[1] = {};
  const std::int64_t t[1] = {};
  float lse[1];
  double total;
  BOOST_CHECK_THROW(ix::cross_entropy_forward(ex, x, t, lse, ReductionLayout{1, 0, 1}, 0.0, 1.0, &total), Error);
  BOOST_CHECK_THROW(ix::cross_entropy_forward(ex, x, t, lse, ReductionLayout{1, 1, 1}, 1.5, 1.0, &total), Error);
}

BOOST_AUTO_TEST_SUITE_END()
