// kernels/cpu/gemm_avx512.hpp's register-tile products against a double reference, within the
// float summation bound (k + 1) * 2^-24 * (sum_p |A(i, p) B(p, j)| + |C(i, j)| when accumulating):
// row counts that are and are not multiples of the tile's 6 and 8 rows, widths of 1 to 4 vectors
// and past 64 columns, depth 1 and beyond a tile's, A as it is and transposed, strides wider than
// the matrices (their padding NaN, so that reading it poisons the result), and C += op(A) B.
// Builds without AVX-512 have no such kernel (Winograd's products go to OpenBLAS there): skipped.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <ptrain/kernels/cpu/gemm_avx512.hpp>

#include "spatial_compare.hpp"

using namespace ptrain;
using namespace ptrain::test;
namespace ut = boost::unit_test;

BOOST_AUTO_TEST_SUITE(gemm_avx512_test)

namespace {

boost::test_tools::assertion_result built_for_avx512(ut::test_unit_id) {
  boost::test_tools::assertion_result has(kernels::has_gemm_avx512);
  has.message() << "skipped: this build has no AVX-512 (not compiled for a CPU with it); Winograd's products run "
                   "on OpenBLAS, tested by winograd_test";
  return has;
}

// rows x cols, rows ld apart, NaN between them.
[[maybe_unused]] std::vector<float> matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint64_t seed) {
  std::vector<float> m(static_cast<std::size_t>(rows * ld), std::numeric_limits<float>::quiet_NaN());
  const Tensor<double> values = random_tensor({rows, cols}, seed);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) m[static_cast<std::size_t>(r * ld + c)] = float(values[r * cols + c]);
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(register_tiles_are_within_the_float_summation_bound, *ut::precondition(built_for_avx512)) {
#if defined(__AVX512F__) && !defined(__CUDACC__)
  int checked = 0;
  for (const std::int64_t m : {1, 5, 6, 7, 8, 13, 50})
    for (const std::int64_t n : {16, 32, 48, 64, 80, 208})
      for (const std::int64_t k : {1, 3, 37, 300})
        for (const bool trans_a : {false, true})
          for (const bool accumulate : {false, true}) {
            const std::int64_t lda = (trans_a ? m : k) + 3, ldb = n + 5, ldc = n + 7;
            const std::int64_t a_rows = trans_a ? k : m;
            const std::vector<float> a = matrix(a_rows, trans_a ? m : k, lda, 1 + m), b = matrix(k, n, ldb, 2 + n);
            const std::vector<float> c0 = matrix(m, n, ldc, 3 + k);
            std::vector<float> c = c0;
            kernels::gemm_avx512(trans_a, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
            double worst = 0;  // |error| / bound, worst over C
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                const double start = accumulate ? c0[static_cast<std::size_t>(i * ldc + j)] : 0.0;
                double sum = start, magnitude = std::abs(start);
                for (std::int64_t p = 0; p < k; ++p) {
                  const double x = a[static_cast<std::size_t>(trans_a ? p * lda + i : i * lda + p)];
                  const double y = b[static_cast<std::size_t>(p * ldb + j)];
                  sum += x * y;
                  magnitude += std::abs(x * y);
                }
                const double bound = double(k + 1) * std::ldexp(1.0, -24) * magnitude + 1e-30;
                const double got = c[static_cast<std::size_t>(i * ldc + j)];
                worst = std::max(worst, std::isnan(got) ? INFINITY : std::abs(got - sum) / bound);
              }
            BOOST_TEST(worst <= 1.0, "m " << m << " n " << n << " k " << k << " trans_a " << trans_a
                                          << " accumulate " << accumulate << ": error / bound " << worst);
            // C's padding is left alone.
            for (std::int64_t i = 0; i < m; ++i)
              BOOST_TEST(std::isnan(c[static_cast<std::size_t>(i * ldc + n)]));
            ++checked;
          }
  BOOST_TEST(checked == 7 * 6 * 4 * 2 * 2);
#endif
}

BOOST_AUTO_TEST_SUITE_END()
