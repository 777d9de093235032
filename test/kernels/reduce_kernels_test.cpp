// The executor-generic reductions (kernels/indexed/reduce.hpp) run by the HostExecutor against the
// CPU: sum and mean against the autograd ops and kernels::sum_indexed, column sums against linear's
// bias gradient, channel sums against conv2d_grad_bias.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/kernels/cpu/conv.hpp>
#include <ptrain/kernels/cpu/elementwise.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/reduce.hpp>

#include "reduction_checks.hpp"

using namespace ptrain;
using kernels::ChannelLayout;
using kernels::HostExecutor;
using test::expect_close;
using test::reduction_tolerance;
using test::uniform_values;
namespace ix = kernels::indexed;

BOOST_AUTO_TEST_SUITE(reduce_kernels_test)

namespace {

template <class T>
void check_sum_and_mean(std::int64_t n) {
  BOOST_TEST_CONTEXT(n << " elements") {
    const auto v = uniform_values<T>(n, 61, -1, 3);
    const Var<T> x(Tensor<T>::from(Shape{n}, v));
    const double tol = reduction_tolerance<T>;
    T got{};
    ix::sum_all(HostExecutor{}, v.data(), n, 1.0, &got);
    expect_close(&got, sum(x).value().data(), 1, tol, "sum");
    if (n > 0) {
      ix::sum_all(HostExecutor{}, v.data(), n, 1.0 / static_cast<double>(n), &got);
      expect_close(&got, mean(x).value().data(), 1, tol, "mean");
    }
  }
}

template <class T>
void check_column_sums(std::int64_t rows, std::int64_t cols) {
  BOOST_TEST_CONTEXT("linear bias gradient of [" << rows << ", " << cols << "]") {
    const auto gy = uniform_values<T>(rows * cols, 62);
    Var<T> x(Tensor<T>::from(Shape{rows, 2}, uniform_values<T>(rows * 2, 63)));
    Var<T> w(Tensor<T>::from(Shape{cols, 2}, uniform_values<T>(cols * 2, 64)));
    Var<T> b(Tensor<T>::zeros(Shape{cols}), true);
    backward(linear(x, w, b), Tensor<T>::from(Shape{rows, cols}, gy));
    std::vector<T> got(cols);
    ix::column_sums(HostExecutor{}, gy.data(), rows, cols, got.data());
    expect_close(got, b.grad().to_vector(), reduction_tolerance<T>, "column sums");
  }
}

template <class T>
void check_channel_sums(const ChannelLayout& l) {
  BOOST_TEST_CONTEXT("conv bias gradient of [" << l.outer << ", " << l.channels << ", " << l.inner << "]") {
    const auto gy = uniform_values<T>(l.numel(), 65);
    kernels::Conv2dGeometry g;
    g.batch = l.outer;
    g.out_channels = l.channels;
    g.out_h = l.inner;
    g.out_w = 1;
    std::vector<T> want(l.channels), got(l.channels);
    kernels::conv2d_grad_bias(g, gy.data(), want.data());
    ix::channel_sums(HostExecutor{}, gy.data(), l, got.data());
    expect_close(got, want, reduction_tolerance<T>, "channel sums");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(sum_and_mean_match_the_ops) {
  for (std::int64_t n : {0, 1, 4095, 4096, 4097, 20000}) {
    check_sum_and_mean<double>(n);
    check_sum_and_mean<float>(n);
  }
  check_sum_and_mean<ptrain::half>(3000);
  check_sum_and_mean<ptrain::bfloat16>(3000);
}

// Same blocks, same order: the host run equals kernels::sum_indexed to the last bit.
BOOST_AUTO_TEST_CASE(two_stage_sum_adds_as_sum_indexed) {
  const auto v = uniform_values<double>(10000, 66);
  const auto term = [&](std::int64_t i) { return v[static_cast<std::size_t>(i)] * 1e3; };
  double got = 0;
  ix::sum_terms(HostExecutor{}, 10000, ix::LoadDouble<double>{v.data()}, 1e3, &got);
  double blocks = 0;
  for (std::int64_t b = 0; b < 10000; b += ix::sum_block) {
    double s = 0;
    for (std::int64_t i = b; i < std::min<std::int64_t>(10000, b + ix::sum_block); ++i) s += v[i];
    blocks += s;
  }
  BOOST_TEST(got == 1e3 * blocks);
  BOOST_TEST(std::abs(got - kernels::sum_indexed(10000, term)) < 1e-9 * std::abs(got));
}

BOOST_AUTO_TEST_CASE(column_sums_match_linear_bias_gradient) {
  check_column_sums<double>(7, 5);
  check_column_sums<float>(300, 1);
  check_column_sums<float>(3, 5000);
  check_column_sums<ptrain::half>(9, 4);
}

BOOST_AUTO_TEST_CASE(channel_sums_match_conv_bias_gradient) {
  check_channel_sums<double>({3, 4, 50});
  check_channel_sums<double>({2, 5000, 1});
  check_channel_sums<float>({5, 3, 7});
  check_channel_sums<ptrain::bfloat16>({2, 3, 16});
  check_channel_sums<float>({0, 3, 4});
}

BOOST_AUTO_TEST_SUITE_END()
