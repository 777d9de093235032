#pragma once
// Row-major GEMM: C = alpha * op(A) * op(B) + beta * C. OpenBLAS through CBLAS when the build
// found it (PTRAIN_HAS_CBLAS; about 1.6x Eigen's own GEMM on two cores here), Eigen otherwise, and
// Eigen too where OpenBLAS runs kernels for an older CPU than the build targets (blas_below_build).
// Large products are split by rows or columns of C (whichever shares the smaller operand) over
// the OpenMP threads, each running a single-threaded GEMM; inside a parallel region the call
// stays on its thread.
// half and bfloat16 operands are widened to float and multiplied by the float GEMM, so products
// accumulate in float (as tensor cores do) and C is rounded once (see widen.hpp); bfloat16 runs on
// vdpbf16ps instead where the CPU has it (gemm_bf16.hpp), with the same float accumulation, a
// bfloat16 C computed and rounded block by block in the threads' caches (gemm_bf16_rounded).
#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include <Eigen/Core>
#if defined(PTRAIN_HAS_CBLAS)
#include <cblas.h>
#endif

#include "ptrain/core/half.hpp"
#include "ptrain/device/threads.hpp"
#include "ptrain/kernels/cpu/gemm_bf16.hpp"
#include "ptrain/kernels/cpu/widen.hpp"
#include "ptrain/core/prebuilt.hpp"

#if defined(PTRAIN_HAS_CBLAS)
// OpenBLAS's name for the kernel set it runs; weak, as another CBLAS has none.
extern "C" char* openblas_get_corename(void) __attribute__((weak));
#endif

namespace ptrain::kernels {

// Whether OpenBLAS runs kernels for an older x86 than this build's target (AVX2 and FMA or more):
// it picks them from the CPU model when it loads, and Debian 12's (0.3.21) takes Prescott's
// (SSE3) for a model it does not know, as on a virtual "Intel Xeon Processor" with AVX-512, where
// its 2048^3 float GEMM ran at a fifth of Eigen's compiled for the host (18 against 86 GFLOP/s on
// one core; SkylakeX's set 102). Then kernels::gemm runs Eigen's GEMM for float and double (also
// where OPENBLAS_CORETYPE names such a set). Asked once.
inline bool blas_below_build() {
#if defined(PTRAIN_HAS_CBLAS) && defined(__AVX2__) && defined(__FMA__) && !defined(__CUDACC__)
  static const bool below = [] {
    if (!openblas_get_corename) return false;
    const char* name = openblas_get_corename();
    const std::string_view core(name ? name : "");
    for (const std::string_view old : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai",
                                       "Coppermine", "Northwood", "Banias", "Unknown"})
      if (core == old) return true;
    return false;
  }();
  return below;
#else
  return false;
#endif
}

// Which float GEMM kernels::gemm runs: "openblas", or "eigen" (no CBLAS, or blas_below_build).
inline std::string_view float_gemm_engine() {
#if defined(PTRAIN_HAS_CBLAS)
  return blas_below_build() ? "eigen" : "openblas";
#else
  return "eigen";
#endif
}

namespace detail {
template <class T>
void gemm_serial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
#if defined(PTRAIN_HAS_CBLAS)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    if (!blas_below_build()) {
      const auto ta = trans_a ? CblasTrans : CblasNoTrans;
      const auto tb = trans_b ? CblasTrans : CblasNoTrans;
      const auto M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
      if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                    beta, c, static_cast<int>(ldc));
      else
        cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                    beta, c, static_cast<int>(ldc));
      return;
    }
#endif
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  using In = Eigen::Map<const Mat, 0, Stride>;
  Eigen::Map<Mat, 0, Stride> C(c, m, n, Stride(ldc));
  if (k == 0) {
    if (beta == T(0)) C.setZero(); else C *= beta;
    return;
  }
  auto run = [&](const auto& A, const auto& B) {
    if (beta == T(0)) {
      C.noalias() = alpha * (A * B);
    } else {
      if (beta != T(1)) C *= beta;
      C.noalias() += alpha * (A * B);
    }
  };
  const In A(a, trans_a ? k : m, trans_a ? m : k, Stride(lda));
  const In B(b, trans_b ? n : k, trans_b ? k : n, Stride(ldb));
  if (trans_a && trans_b) run(A.transpose(), B.transpose());
  else if (trans_a) run(A.transpose(), B);
  else if (trans_b) run(A, B.transpose());
  else run(A, B);
}
// Splits a large product over the OpenMP threads (see the top of the file).
// serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) computes one slice.
template <class In, class Out, class Scalar, class Serial>
void gemm_parallel(Serial serial, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   Scalar alpha, const In* a, std::int64_t lda, const In* b, std::int64_t ldb, Scalar beta, Out* c,
                   std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  int threads = num_threads();
#if defined(_OPENMP)
  if (omp_in_parallel()) threads = 1;
#else
  threads = 1;
#endif
  constexpr std::int64_t min_rows = 32;  // below this a slice's GEMM loses more than threads gain
  const bool big = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= 1e6;
  // Each slice packs the whole of the operand it shares: split rows (sharing B, k x n) where B is
  // the smaller, columns (sharing A, m x k) where A is (an LM decoder's [700, 28782] output).
  const bool rows_fit = m >= threads * min_rows, columns_fit = n >= threads * min_rows;
  const bool by_rows = rows_fit && (n <= m || !columns_fit);
  if (threads < 2 || !big || (!rows_fit && !columns_fit)) {
    serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const std::int64_t extent = by_rows ? m : n;
#pragma omp parallel num_threads(threads)
  {
#if defined(_OPENMP)
    const std::int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
#else
    const std::int64_t t = 0, count = 1;
#endif
    // Slices in multiples of 16 keep each one's columns vector-aligned.
    const std::int64_t per = (extent / count + 15) / 16 * 16;
    const std::int64_t begin = std::min(extent, t * per), end = t + 1 == count ? extent : std::min(extent, begin + per);
    if (begin < end) {
      if (by_rows)  // rows [begin, end) of op(A) and of C
        serial(trans_a, trans_b, end - begin, n, k, alpha, trans_a ? a + begin : a + begin * lda, lda, b, ldb, beta,
               c + begin * ldc, ldc);
      else  // columns [begin, end) of op(B) and of C
        serial(trans_a, trans_b, m, end - begin, k, alpha, a, lda, trans_b ? b + begin * ldb : b + begin, ldb, beta,
               c + begin, ldc);
    }
  }
}

// C (float) = alpha * op(A) * op(B) + beta * C for 16-bit A and B, products summed in float:
// vdpbf16ps for bfloat16 where cpu_bf16_gemm_enabled(), else the float GEMM on widened copies.
template <class T>
  requires is_reduced_float_v<T>
void gemm_to_float(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                   const T* a, std::int64_t lda, const T* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
#if defined(PTRAIN_HALF_X86)
  if constexpr (std::is_same_v<T, bfloat16>)
    if (cpu_bf16_gemm_enabled()) return gemm_parallel(&gemm_bf16_serial, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                                                      ldb, beta, c, ldc);
#endif
  const std::int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  const Tensor<float> af = widen(a, trans_a ? k : m, a_cols, lda), bf = widen(b, trans_b ? n : k, b_cols, ldb);
  gemm_parallel(&gemm_serial<float>, trans_a, trans_b, m, n, k, alpha, af.data(), std::max<std::int64_t>(1, a_cols),
                bf.data(), std::max<std::int64_t>(1, b_cols), beta, c, ldc);
}

#if defined(PTRAIN_HALF_X86)
// A thread's float block of C (its own scratch buffers, apart from the callers' float ones).
struct RoundedBlock {
  float value;
};

// gemm_widened on vdpbf16ps: C in blocks of up to 128 rows x 1024 columns (512 KB of float, in a
// core's L2), each computed on one thread into its float buffer and rounded into C from there,
// the blocks spread over the threads; columns are cut finer where that gives each thread a block.
// Each element's products add up in the order gemm_bf16_serial's k-blocks give, whatever the
// blocks: the same bits as one product over the whole of C.
inline void gemm_bf16_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                              const bfloat16* a, std::int64_t lda, const bfloat16* b, std::int64_t ldb, float beta,
                              bfloat16* c, std::int64_t ldc) {
  constexpr std::int64_t block_rows = 128;
  const std::int64_t row_blocks = (m + block_rows - 1) / block_rows;
  int threads = num_threads();
#if defined(_OPENMP)
  if (omp_in_parallel()) threads = 1;
#endif
  const bool big = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= 1e6;
  if (!big) threads = 1;
  std::int64_t block_cols = 1024;
  while (block_cols > 64 && row_blocks * ((n + block_cols - 1) / block_cols) < threads) block_cols /= 2;
  const std::int64_t col_blocks = (n + block_cols - 1) / block_cols, blocks = row_blocks * col_blocks;
#pragma omp parallel for num_threads(threads) if (threads > 1 && blocks > 1) schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t r0 = blk / col_blocks * block_rows, c0 = blk % col_blocks * block_cols;
    const std::int64_t rows = std::min(block_rows, m - r0), cols = std::min(block_cols, n - c0);
    float* cf = &scratch<RoundedBlock>(0, static_cast<std::size_t>(rows * cols))->value;
    if (beta != 0.0f)
      for (std::int64_t r = 0; r < rows; ++r) convert_run(c + (r0 + r) * ldc + c0, cols, cf + r * cols);
    gemm_bf16_serial(trans_a, trans_b, rows, cols, k, alpha, trans_a ? a + r0 : a + r0 * lda, lda,
                     trans_b ? b + c0 * ldb : b + c0, ldb, beta, cf, cols);
    for (std::int64_t r = 0; r < rows; ++r) convert_run(static_cast<const float*>(cf + r * cols), cols, c + (r0 + r) * ldc + c0);
  }
}
#endif

// C = alpha * op(A) * op(B) + beta * C for the 16-bit types: the product in float, C rounded once
// (bfloat16 on vdpbf16ps: gemm_bf16_rounded; else on a float copy of C).
template <class T>
void gemm_widened(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                  const T* a, std::int64_t lda, const T* b, std::int64_t ldb, float beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
#if defined(PTRAIN_HALF_X86)
  if constexpr (std::is_same_v<T, bfloat16>)
    if (cpu_bf16_gemm_enabled()) return gemm_bf16_rounded(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
  Tensor<float> cf = beta == 0.0f ? float_buffer(m * n) : widen(c, m, n, ldc);
  gemm_to_float(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, cf.data(), n);
  for (std::int64_t r = 0; r < m; ++r)
    convert(std::span<const float>(cf.data() + r * n, static_cast<std::size_t>(n)),
            std::span<T>(c + r * ldc, static_cast<std::size_t>(n)));
}

}  // namespace detail

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if constexpr (is_reduced_float_v<T>)
    detail::gemm_widened(trans_a, trans_b, m, n, k, static_cast<float>(alpha), a, lda, b, ldb,
                         static_cast<float>(beta), c, ldc);
  else
    detail::gemm_parallel(&detail::gemm_serial<T>, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The same with 16-bit operands and a float C, for kernels that keep sums in float (convolution
// over 16-bit images, its gradients summed over the batch).
template <class T>
  requires is_reduced_float_v<T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  detail::gemm_to_float(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::gemm)
// The 16-bit GEMMs' float product where vdpbf16ps does not run (Eigen's, or OpenBLAS's).
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::detail::gemm_serial)
