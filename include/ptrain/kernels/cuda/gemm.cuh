#pragma once
// Row-major GEMM on the GPU through cuBLAS, the same call as kernels::gemm on the CPU:
// C = alpha * op(A) * op(B) + beta * C. cuBLAS is column-major, so it computes C^T = op(B)^T op(A)^T
// (the same memory). half and bfloat16 multiply on tensor cores and accumulate in float; float
// stays full fp32 (no TF32, as PyTorch's default for matmul).
#if !defined(__CUDACC__)
#error "ptrain/kernels/cuda/gemm.cuh uses cuBLAS and must be compiled by nvcc"
#endif
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "ptrain/core/half.hpp"
#include "ptrain/device/cuda_check.hpp"
#include "ptrain/device/cuda_stream.hpp"

namespace ptrain::kernels::cuda {

inline const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}
template <class... Parts>
void cublas_check(cublasStatus_t status, Parts&&... call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(std::forward<Parts>(call)..., " failed: ", cublas_status_name(status), " (", static_cast<int>(status), ")");
}

// One cuBLAS handle per thread and device, created on first use.
inline cublasHandle_t cublas_handle() {
  struct Handles {
    cublasHandle_t by_device[64] = {};
    ~Handles() {
      for (auto h : by_device)
        if (h) (void)cublasDestroy(h);
    }
  };
  thread_local Handles handles;
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  check(device >= 0 && device < 64, "cublas_handle: device ", device, " beyond the 64 supported");
  cublasHandle_t& h = handles.by_device[device];
  if (!h) cublas_check(cublasCreate(&h), "cublasCreate on device ", device);
  return h;
}

template <class T>
struct CublasTypes;
template <>
struct CublasTypes<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <>
struct CublasTypes<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
  using Scale = double;
};
template <>
struct CublasTypes<half> {
  static constexpr cudaDataType_t data = CUDA_R_16F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <>
struct CublasTypes<bfloat16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};

// Device pointers; leading dimensions are row strides, as in the CPU kernels::gemm.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, accumulate_t<T> alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, accumulate_t<T> beta, T* c, std::int64_t ldc,
          cudaStream_t stream = ptrain::cuda::current_stream()) {
  if (m == 0 || n == 0) return;
  constexpr auto limit = std::numeric_limits<int>::max();
  check(m <= limit && n <= limit && k <= limit && lda <= limit && ldb <= limit && ldc <= limit, "gemm: ", m, "x", n,
        "x", k, " exceeds cuBLAS's 32-bit sizes");
  using Types = CublasTypes<T>;
  const typename Types::Scale alpha_s = alpha, beta_s = beta;
  cublasHandle_t handle = cublas_handle();
  cublas_check(cublasSetStream(handle, stream), "cublasSetStream");
  cublas_check(cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                            static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha_s, b, Types::data,
                            static_cast<int>(ldb), a, Types::data, static_cast<int>(lda), &beta_s, c, Types::data,
                            static_cast<int>(ldc), Types::compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx ", m, "x", n, "x", k);
}

}  // namespace ptrain::kernels::cuda
