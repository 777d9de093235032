#pragma once
// Row-major GEMM: C = alpha * op(A) * op(B) + beta * C. OpenBLAS through CBLAS when the build
// found it (PTRAIN_HAS_CBLAS; about 1.6x Eigen's own GEMM on two cores here), Eigen otherwise.
#include <cstdint>
#include <type_traits>

#include <Eigen/Core>
#if defined(PTRAIN_HAS_CBLAS)
#include <cblas.h>
#endif

namespace ptrain::kernels {

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
#if defined(PTRAIN_HAS_CBLAS)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
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

}  // namespace ptrain::kernels
