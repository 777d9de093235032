#pragma once
// The CUDA device: cudaMalloc'd storage on the current device, synchronous cudaMemcpy copies on
// the default stream, fill by a kernel. Compiled by nvcc only (include ptrain/cuda.hpp).
#if !defined(__CUDACC__)
#error "ptrain/device/cuda.hpp launches CUDA kernels and must be compiled by nvcc (a .cu file linked to ptrain::cuda)"
#endif
#include <cstddef>
#include <utility>

#include <cuda_runtime.h>

#include "ptrain/device/cuda_check.hpp"
#include "ptrain/device/threads.hpp"

namespace ptrain {

namespace detail {
template <class T>
__global__ void cuda_fill_kernel(T* dst, T value, std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[i] = value;
}
}  // namespace detail

struct Cuda {
  static constexpr std::size_t alignment = 256;  // what cudaMalloc guarantees
  static constexpr const char* name = "cuda";
  // Threads per block and the most blocks a grid-stride launch uses.
  static constexpr unsigned block_threads = 256;
  static constexpr unsigned max_blocks = 4096;

  static unsigned blocks_for(std::size_t count) {
    const std::size_t blocks = (count + block_threads - 1) / block_threads;
    return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
  }

  template <class T>
  static T* allocate(std::size_t count) {
    if (count == 0) return nullptr;
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc of ", count * sizeof(T), " bytes");
    return static_cast<T*>(p);
  }
  // Runs from a shared_ptr deleter, so it must not throw; a failure here (the runtime already
  // torn down at exit) leaves nothing to recover.
  template <class T>
  static void deallocate(T* p, std::size_t) {
    if (p && cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  }
  template <class T>
  static void copy_to_host(T* host_dst, const T* src, std::size_t count) {
    if (count)
      cuda_check(cudaMemcpy(host_dst, src, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy device to host of ",
                 count * sizeof(T), " bytes");
  }
  template <class T>
  static void copy_from_host(T* dst, const T* host_src, std::size_t count) {
    if (count)
      cuda_check(cudaMemcpy(dst, host_src, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy host to device of ",
                 count * sizeof(T), " bytes");
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t count) {
    if (count)
      cuda_check(cudaMemcpy(dst, src, count * sizeof(T), cudaMemcpyDeviceToDevice), "cudaMemcpy device to device of ",
                 count * sizeof(T), " bytes");
  }
  template <class T>
  static void fill(T* dst, T value, std::size_t count) {
    if (count == 0) return;
    detail::cuda_fill_kernel<T><<<blocks_for(count), block_threads>>>(dst, value, count);
    cuda_check(cudaGetLastError(), "fill kernel launch (", count, " elements)");
  }
  // Host threads available to work feeding this device (data loading, host-side loops).
  static int threads() { return num_threads(); }
};

}  // namespace ptrain
