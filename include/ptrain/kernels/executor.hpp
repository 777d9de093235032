#pragma once
// An executor runs the index-space kernels (kernels/indexed.hpp), GEMMs and scratch buffers of
// an algorithm written once for both devices: HostExecutor here runs them on the CPU (serial
// functor loops, the CPU GEMM), CudaExecutor (kernels/cuda/executor.cuh) on a GPU. A GPU op is
// a function template over the executor, so the tests run its whole control flow on the CPU.
//
//   ex.indexed(n, f)                     f(i) for i in [0, n)
//   ex.row_reduction(rows, length, f)    see RowReduction
//   ex.gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)   row-major, as kernels::gemm
//   ex.buffer<T>(n)                      an uninitialised Tensor<T, Executor::device> of n elements
#include <cstdint>

#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::kernels {

struct HostExecutor {
  using device = Cpu;

  template <IndexedKernel F>
  void indexed(std::int64_t n, const F& f) const {
    run_indexed(n, f);
  }
  template <RowReduction F>
  void row_reduction(std::int64_t rows, std::int64_t length, const F& f) const {
    run_row_reduction(rows, length, f);
  }
  template <class T>
  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, accumulate_t<T> alpha,
            const T* a, std::int64_t lda, const T* b, std::int64_t ldb, accumulate_t<T> beta, T* c,
            std::int64_t ldc) const {
    kernels::gemm<T>(trans_a, trans_b, m, n, k, static_cast<T>(alpha), a, lda, b, ldb, static_cast<T>(beta), c, ldc);
  }
  template <class T>
  Tensor<T, Cpu> buffer(std::int64_t n) const {
    return Tensor<T, Cpu>(Shape{n});
  }
};

}  // namespace ptrain::kernels
