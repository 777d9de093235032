// The executor-generic softmax and log-softmax (kernels/indexed/softmax.hpp) run by the
// HostExecutor against the CPU kernels (kernels/cpu/softmax.hpp), forward and backward, in double,
// float, half and bfloat16, over the last dimension and inner ones, short and long rows.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ptrain/kernels/cpu/softmax.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/softmax.hpp>

#include "reduction_checks.hpp"

using namespace ptrain;
using kernels::HostExecutor;
using kernels::ReductionLayout;
using test::expect_close;
using test::reduction_tolerance;
using test::uniform_values;

BOOST_AUTO_TEST_SUITE(softmax_kernels_test)

namespace {

template <class T>
void check_layout(const ReductionLayout& l, const char* type, double spread) {
  BOOST_TEST_CONTEXT(type << " [" << l.outer << ", " << l.n << ", " << l.inner << "] spread " << spread) {
    const std::int64_t n = l.numel();
    const auto x = uniform_values<T>(n, 11, -spread, spread);
    const auto g = uniform_values<T>(n, 12);
    const double tol = reduction_tolerance<T>;
    const HostExecutor ex;
    for (bool take_log : {false, true}) {
      const std::string op = take_log ? "log_softmax" : "softmax";
      std::vector<T> want(n), got(n), want_gx(n), got_gx(n);
      kernels::softmax_forward(x.data(), want.data(), l, take_log);
      kernels::indexed::softmax_forward(ex, x.data(), got.data(), l, take_log);
      expect_close(got, want, tol, op + " forward");
      kernels::softmax_backward(want.data(), g.data(), want_gx.data(), l, take_log);
      kernels::indexed::softmax_backward(ex, want.data(), g.data(), got_gx.data(), l, take_log);
      expect_close(got_gx, want_gx, tol, op + " backward");
    }
  }
}

template <class T>
void check_type(const char* type) {
  const std::vector<ReductionLayout> layouts{
      {4, 7, 1},     // classification rows
      {3, 5, 6},     // an inner dimension: each row folded by one thread
      {2, 300, 3},   // long strided rows: a block each
      {5000, 3, 1},  // many short contiguous rows
      {37, 2000, 1}, // the 16-bit types: several blocks of rows (widen.hpp's over_row_blocks)
      {2, 40000, 1}, // and rows longer than a block
      {2, 1, 4},     // one element per row
      {0, 4, 3},     // empty
  };
  for (const auto& l : layouts) check_layout<T>(l, type, 2.0);
  check_layout<T>({3, 9, 2}, type, 40.0);  // exp overflows without the max
}

// The masked softmax of attention: x [batch 8, heads 4, queries 35, keys 35] (enough rows for every thread) under a causal
// mask [35, 35] broadcast to it (so every row has a masked tail), with one query row masked
// everywhere by a second mask: the CPU kernel against the indexed algorithm.
template <class T>
void check_masked(const char* type) {
  BOOST_TEST_CONTEXT(type << " masked softmax") {
    const std::int64_t batch = 8, heads = 4, length = 35, rows = batch * heads * length;
    const Shape x_shape{batch, heads, length, length}, mask_shape{length, length};
    const auto x = uniform_values<T>(rows * length, 13, -3, 3);
    std::vector<T> mask(static_cast<std::size_t>(length * length));
    const T minus_inf = static_cast<T>(-std::numeric_limits<float>::infinity());
    for (std::int64_t q = 0; q < length; ++q)
      for (std::int64_t k = 0; k < length; ++k) mask[q * length + k] = k <= q ? T(0.5 * (k % 3)) : minus_inf;
    for (std::int64_t k = 0; k < length; ++k) mask[7 * length + k] = minus_inf;  // query 7 sees nothing
    const kernels::BroadcastIndex mask_at(mask_shape, x_shape, "test");
    std::vector<T> want(x.size()), got(x.size());
    kernels::indexed::masked_softmax_forward(HostExecutor{}, x.data(), mask.data(), mask_at, want.data(), rows, length);
    kernels::masked_softmax_forward(x.data(), mask.data(), mask_at, got.data(), rows, length);
    expect_close(got, want, reduction_tolerance<T>, "masked softmax");
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t q = r % length;
      for (std::int64_t k = 0; k < length; ++k) {
        const double value = static_cast<double>(got[static_cast<std::size_t>(r * length + k)]);
        if (k > q || q == 7) BOOST_TEST(value == 0.0, "row " << r << " key " << k << " is masked: " << value);
      }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(masked_softmax_matches_the_indexed_algorithm_and_zeroes_masked_terms) {
  check_masked<double>("double");
  check_masked<float>("float");
  check_masked<ptrain::half>("half");
}

BOOST_AUTO_TEST_CASE(double_matches_cpu) { check_type<double>("double"); }
BOOST_AUTO_TEST_CASE(float_matches_cpu) { check_type<float>("float"); }
BOOST_AUTO_TEST_CASE(half_matches_cpu) { check_type<ptrain::half>("half"); }
BOOST_AUTO_TEST_CASE(bfloat16_matches_cpu) { check_type<ptrain::bfloat16>("bfloat16"); }

// The online (max, sum of exp) pairs combine in any grouping, as a GPU block's tree does.
BOOST_AUTO_TEST_CASE(online_log_sum_exp_combines_in_any_order) {
  using M = kernels::indexed::MaxSumExp<double>;
  const std::vector<double> v{3.0, -1.0, 700.0, 2.5, 699.0};
  double max = v[2], sum = 0;
  for (double x : v) sum += std::exp(x - max);
  const double want = max + std::log(sum);
  M left = M::empty();
  for (double x : v) left = M::combine(left, M::of(x));
  const M tree = M::combine(M::combine(M::of(v[0]), M::of(v[1])),
                            M::combine(M::combine(M::of(v[2]), M::empty()), M::combine(M::of(v[3]), M::of(v[4]))));
  BOOST_TEST(std::abs(left.log_sum_exp() - want) < 1e-12);
  BOOST_TEST(std::abs(tree.log_sum_exp() - want) < 1e-12);
  BOOST_TEST(M::combine(M::empty(), M::empty()).sum == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
