#pragma once
// An executor runs the index-space kernels (kernels/indexed.hpp), GEMMs and scratch buffers of
// an algorithm written once for every device (a Device names its executor, device/device.hpp):
//   CpuExecutor   Cpu's: the functor loops spread over the OpenMP threads, the CPU GEMM. The
//                 kernel families with tuned CPU kernels (kernels/cpu/) reach them through
//                 their dispatch point instead; the rest run their indexed algorithm here.
//   HostExecutor  HostEmulated's: serial functor loops and the CPU GEMM, so the tests run a GPU
//                 algorithm's whole control flow on the CPU, in the order a GPU would see it.
//   CudaExecutor  Cuda's (kernels/cuda/executor.cuh, nvcc only).
//
//   ex.indexed(n, f)                     f(i) for i in [0, n)
//   ex.row_reduction(rows, length, f)    see RowReduction
//   ex.gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)   row-major, as kernels::gemm
//   ex.buffer<T>(n)                      an uninitialised Tensor<T, Executor::device> of n elements
#include <concepts>
#include <cstdint>

#include "ptrain/core/half.hpp"
#include "ptrain/core/op_profile.hpp"
#include "ptrain/device/host_emulated.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::kernels {

namespace detail {
// The smallest kernels an executor must run: an index-space functor and a row reduction.
struct IndexedKernelArchetype {
  void operator()(std::int64_t) const {}
};
struct RowReductionArchetype {
  using accumulator = float;
  float identity() const { return 0; }
  float term(std::int64_t, std::int64_t) const { return 0; }
  float combine(float a, float b) const { return a + b; }
  void finish(std::int64_t, float) const {}
};
}  // namespace detail

// The contract above in code (test/kernels/executor_concept_test.cpp compiles an archetype).
template <class E>
concept Executor = requires(const E& ex, std::int64_t n, const float* a, float* c) {
  typename E::device;
  ex.indexed(n, detail::IndexedKernelArchetype{});
  ex.row_reduction(n, n, detail::RowReductionArchetype{});
  ex.template gemm<float>(false, false, n, n, n, 1.0f, a, n, a, n, 0.0f, c, n);
  { ex.template buffer<float>(n) } -> std::same_as<Tensor<float, typename E::device>>;
};

// What both host executors share: host memory and the CPU GEMM.
struct HostMemoryExecutor {
  using device = Cpu;

  template <class T>
  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, accumulate_t<T> alpha,
            const T* a, std::int64_t lda, const T* b, std::int64_t ldb, accumulate_t<T> beta, T* c,
            std::int64_t ldc) const {
    ProfiledOp profiled("gemm", ProfiledOp::Outermost);
    kernels::gemm<T>(trans_a, trans_b, m, n, k, static_cast<T>(alpha), a, lda, b, ldb, static_cast<T>(beta), c, ldc);
  }
  template <class T>
  Tensor<T, Cpu> buffer(std::int64_t n) const {
    return Tensor<T, Cpu>(Shape{n});
  }
};

struct CpuExecutor : HostMemoryExecutor {
  // Below this many elements a loop stays on one thread: waking the pool costs more.
  static constexpr std::int64_t parallel_grain = 1 << 15;

  // Indexed kernels are gathers (each i writes only its own outputs), so any split is safe.
  template <IndexedKernel F>
  void indexed(std::int64_t n, const F& f) const {
    ProfiledOp profiled("other_kernels", ProfiledOp::Outermost);
#pragma omp parallel for schedule(static) if (n >= parallel_grain)
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
  template <RowReduction F>
  void row_reduction(std::int64_t rows, std::int64_t length, const F& f) const {
    ProfiledOp profiled("other_kernels", ProfiledOp::Outermost);
#pragma omp parallel for schedule(static) if (rows > 1 && rows * length >= parallel_grain)
    for (std::int64_t row = 0; row < rows; ++row) {
      auto total = f.identity();
      for (std::int64_t j = 0; j < length; ++j) total = f.combine(total, f.term(row, j));
      f.finish(row, total);
    }
  }
};

struct HostExecutor : HostMemoryExecutor {
  template <IndexedKernel F>
  void indexed(std::int64_t n, const F& f) const {
    run_indexed(n, f);
  }
  template <RowReduction F>
  void row_reduction(std::int64_t rows, std::int64_t length, const F& f) const {
    run_row_reduction(rows, length, f);
  }
};

static_assert(Executor<CpuExecutor> && Executor<HostExecutor>);

}  // namespace ptrain::kernels
