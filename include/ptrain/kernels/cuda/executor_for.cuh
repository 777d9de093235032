#pragma once
// executor_for<Cuda> (see kernels/executor_for.hpp) is CudaExecutor, which Cuda names; this
// header brings in its definition.
#if !defined(__CUDACC__)
#error "ptrain/kernels/cuda/executor_for.cuh names CudaExecutor and must be compiled by nvcc"
#endif
#include "ptrain/device/cuda.hpp"
#include "ptrain/kernels/cuda/executor.cuh"
#include "ptrain/kernels/executor_for.hpp"
