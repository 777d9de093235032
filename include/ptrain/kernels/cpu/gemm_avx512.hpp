#pragma once
// C = op(A) B (+ C) in float on AVX-512 register tiles, for the many small products of Winograd's
// transform positions (winograd.hpp), where a call to OpenBLAS costs its packing and dispatch on
// every one and, with OPENBLAS_CORETYPE pinning its AVX2 kernels (as this development machine's
// environment does), half the multiply rate of the CPU: its own kernels computed with AVX-512
// (compiled with -march=native on an AVX-512 host) run these products faster.
// Each R x (NV * 16) tile of C is held in R * NV registers over the whole depth k; B's rows are
// read in place (a panel of k x NV * 16 stays in L2 while the rows of C go by), A's elements
// broadcast. Builds without AVX-512 (and nvcc's) have none: kernels::gemm runs instead.
#include <cstdint>
#include <cstring>
#include <utility>

namespace ptrain::kernels {

namespace detail {
// Calls f(std::integral_constant<int, 0>) ... f(<N - 1>): loops unrolled with constant indices,
// so that their values stay in registers (at any optimisation level).
template <int N, class F>
inline void unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}
}  // namespace detail

#if defined(__AVX512F__) && !defined(__CUDACC__)
inline constexpr bool has_gemm_avx512 = true;

namespace detail::avx512 {

typedef float Floats16 __attribute__((vector_size(64)));
inline constexpr int width = 16;

// C[0, R) x [0, NV * 16) (+)= sum over p < k of A(r, p) B[p][.], A(r, p) = a[r * a_row + p * a_col].
template <int R, int NV>
inline void tile(std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col, const float* b,
                 std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate) {
  Floats16 acc[R][NV];
  unroll<R>([&](auto r) {
    unroll<NV>([&](auto v) {
      if (accumulate)
        std::memcpy(&acc[r][v], c + r * ldc + v * width, sizeof(Floats16));
      else
        acc[r][v] = Floats16{};
    });
  });
  for (std::int64_t p = 0; p < k; ++p) {
    Floats16 row[NV];
    unroll<NV>([&](auto v) { std::memcpy(&row[v], b + p * ldb + v * width, sizeof(Floats16)); });
    const float* column = a + p * a_col;
    unroll<R>([&](auto r) {
      const Floats16 s = Floats16{} + column[r * a_row];
      unroll<NV>([&](auto v) { acc[r][v] += s * row[v]; });
    });
  }
  unroll<R>([&](auto r) {
    unroll<NV>([&](auto v) { std::memcpy(c + r * ldc + v * width, &acc[r][v], sizeof(Floats16)); });
  });
}

// Columns [j, j + NV * 16) of C, every row: R rows at a time, then one at a time.
template <int NV>
inline void panel(std::int64_t m, std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col,
                  const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate) {
  constexpr int R = NV >= 4 ? 6 : 8;  // R * NV accumulators and NV rows of B within 32 registers
  std::int64_t i = 0;
  for (; i + R <= m; i += R) tile<R, NV>(k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, accumulate);
  for (; i < m; ++i) tile<1, NV>(k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, accumulate);
}

}  // namespace detail::avx512

// C[m x n] = op(A) B, or C += op(A) B with `accumulate`; row-major, op(A) m x k (A itself k x m
// with trans_a), n a multiple of 16. Single-threaded.
inline void gemm_avx512(bool trans_a, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                        const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate) {
  namespace av = detail::avx512;
  const std::int64_t a_row = trans_a ? 1 : lda, a_col = trans_a ? lda : 1;
  std::int64_t j = 0;
  for (; j + 4 * av::width <= n; j += 4 * av::width)
    av::panel<4>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
  const std::int64_t rest = (n - j) / av::width;
  if (rest == 3) av::panel<3>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
  if (rest == 2) av::panel<2>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
  if (rest == 1) av::panel<1>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
}
#else
inline constexpr bool has_gemm_avx512 = false;
#endif

}  // namespace ptrain::kernels
