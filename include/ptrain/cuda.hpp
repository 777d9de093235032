#pragma once
// The umbrella for CUDA users: the CPU library plus the Cuda device and the CUDA kernels.
#if !defined(__CUDACC__)
#error "ptrain/cuda.hpp holds CUDA kernels and must be compiled by nvcc: put this include in a .cu file (CMake language CUDA) and link ptrain::cuda; CPU-only code includes ptrain/ptrain.hpp"
#else
// Eigen serves the host side only; without this it marks its functions __host__ __device__
// and nvcc warns about each constexpr std call they make.
#ifndef EIGEN_NO_CUDA
#define EIGEN_NO_CUDA
#endif
#include "ptrain/ptrain.hpp"
#include "ptrain/device/cuda.hpp"
#include "ptrain/device/cuda_stream.hpp"
#include "ptrain/device/cuda_upload.hpp"
#include "ptrain/kernels/cuda/elementwise.cuh"
#include "ptrain/kernels/cuda/executor.cuh"
#include "ptrain/kernels/cuda/executor_for.cuh"
#include "ptrain/kernels/cuda/gemm.cuh"
#include "ptrain/kernels/cuda/launch.cuh"
#endif
