#pragma once
// Elementwise kernels over CUDA tensors: grid-stride loops calling the same host-device functors
// (kernels/functors.hpp) that the CPU loops in kernels/cpu/elementwise.hpp call.
#if !defined(__CUDACC__)
#error "ptrain/kernels/cuda/elementwise.cuh holds CUDA kernels and must be compiled by nvcc"
#endif
#include <cstdint>

#include <cuda_runtime.h>

#include "ptrain/device/cuda.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::kernels {

namespace cuda {

template <class T, class F>
__global__ void map_kernel(const T* in, T* out, std::int64_t n, F f) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = f(in[i]);
}
template <class T, class F>
__global__ void map2_kernel(const T* a, const T* b, T* out, std::int64_t n, F f) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = f(a[i], b[i]);
}

// out[i] = f(in[i]) on device pointers, queued on stream.
template <class T, class F>
void map(const T* in, T* out, std::int64_t n, F f, cudaStream_t stream = nullptr) {
  if (n <= 0) return;
  map_kernel<<<Cuda::blocks_for(static_cast<std::size_t>(n)), Cuda::block_threads, 0, stream>>>(in, out, n, f);
  cuda_check(cudaGetLastError(), "map kernel launch (", n, " elements)");
}
// out[i] = f(a[i], b[i]) on device pointers, queued on stream.
template <class T, class F>
void map2(const T* a, const T* b, T* out, std::int64_t n, F f, cudaStream_t stream = nullptr) {
  if (n <= 0) return;
  map2_kernel<<<Cuda::blocks_for(static_cast<std::size_t>(n)), Cuda::block_threads, 0, stream>>>(a, b, out, n, f);
  cuda_check(cudaGetLastError(), "map2 kernel launch (", n, " elements)");
}

}  // namespace cuda

// The Tensor<T, Cuda> overloads of kernels::map / map2: the same call as on the CPU.
template <class T, class F>
Tensor<T, Cuda> map(const Tensor<T, Cuda>& x, F f) {
  Tensor<T, Cuda> out(x.shape());
  cuda::map(x.data(), out.data(), x.numel(), f);
  return out;
}
template <class T, class F>
Tensor<T, Cuda> map2(const Tensor<T, Cuda>& a, const Tensor<T, Cuda>& b, F f) {
  check(a.shape() == b.shape(), "elementwise: shapes ", a.shape(), " and ", b.shape(), " differ");
  Tensor<T, Cuda> out(a.shape());
  cuda::map2(a.data(), b.data(), out.data(), a.numel(), f);
  return out;
}

}  // namespace ptrain::kernels
