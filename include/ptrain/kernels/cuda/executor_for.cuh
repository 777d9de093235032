#pragma once
// executor_for<Cuda> (see kernels/executor_for.hpp): Var<T, Cuda> ops run on CudaExecutor.
#if !defined(__CUDACC__)
#error "ptrain/kernels/cuda/executor_for.cuh names CudaExecutor and must be compiled by nvcc"
#endif
#include "ptrain/device/cuda.hpp"
#include "ptrain/kernels/cuda/executor.cuh"
#include "ptrain/kernels/executor_for.hpp"

namespace ptrain::kernels {

template <>
struct ExecutorFor<Cuda> {
  using type = CudaExecutor;
};

}  // namespace ptrain::kernels
