#pragma once
// The GPU executor (see kernels/executor.hpp): kernels and cuBLAS calls queued on one stream,
// scratch buffers from the Cuda device's caching allocator.
#if !defined(__CUDACC__)
#error "ptrain/kernels/cuda/executor.cuh holds CUDA kernels and must be compiled by nvcc"
#endif
#include <cstdint>

#include "ptrain/device/cuda.hpp"
#include "ptrain/device/cuda_stream.hpp"
#include "ptrain/kernels/cuda/gemm.cuh"
#include "ptrain/kernels/cuda/launch.cuh"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::kernels {

struct CudaExecutor {
  using device = Cuda;
  cudaStream_t stream = ptrain::cuda::current_stream();

  template <IndexedKernel F>
  void indexed(std::int64_t n, const F& f) const {
    cuda::launch_indexed(n, f, stream);
  }
  template <RowReduction F>
  void row_reduction(std::int64_t rows, std::int64_t length, const F& f) const {
    cuda::launch_row_reduction(rows, length, f, stream);
  }
  template <class T>
  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, accumulate_t<T> alpha,
            const T* a, std::int64_t lda, const T* b, std::int64_t ldb, accumulate_t<T> beta, T* c,
            std::int64_t ldc) const {
    cuda::gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
  }
  template <class T>
  Tensor<T, Cuda> buffer(std::int64_t n) const {
    return Tensor<T, Cuda>(Shape{n});
  }
};

}  // namespace ptrain::kernels
