#pragma once
// The CUDA device: storage on the current device from a caching allocator over cudaMalloc (one
// per device), copies and fills queued on the thread's current stream (copies to the host wait
// for it). Compiled by nvcc only (include ptrain/cuda.hpp).
#if !defined(__CUDACC__)
#error "ptrain/device/cuda.hpp launches CUDA kernels and must be compiled by nvcc (a .cu file linked to ptrain::cuda)"
#endif
#include <cstddef>
#include <mutex>
#include <utility>

#include <cuda_runtime.h>

#include "ptrain/device/caching_allocator.hpp"
#include "ptrain/device/cuda_check.hpp"
#include "ptrain/device/cuda_stream.hpp"
#include "ptrain/device/cuda_upload.hpp"
#include "ptrain/device/threads.hpp"

namespace ptrain {

namespace detail {
template <class T>
__global__ void cuda_fill_kernel(T* dst, T value, std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[i] = value;
}

// cudaMalloc / cudaFree for the caching allocator: out of memory is nullptr, not an error.
struct CudaRawMemory {
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    cuda_check(status, "cudaMalloc of ", bytes, " bytes");
    return p;
  }
  // At exit the runtime may be gone already; nothing is left to recover then.
  static void release(void* p, std::size_t) noexcept {
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  }
};

inline constexpr int max_cuda_devices = 64;

inline int current_cuda_device() {
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  check(device >= 0 && device < max_cuda_devices, "CUDA device ", device, " beyond the ", max_cuda_devices,
        " ptrain supports");
  return device;
}
}  // namespace detail

using CudaAllocator = CachingAllocator<detail::CudaRawMemory>;

// The caching allocators, one per device, created on first use. Never destroyed: tensors held in
// statics may be freed after any destructor order would have run them.
inline CudaAllocator* cuda_allocators[detail::max_cuda_devices] = {};
inline std::mutex cuda_allocators_mutex;

inline CudaAllocator& cuda_allocator(int device) {
  std::lock_guard lock(cuda_allocators_mutex);
  if (!cuda_allocators[device]) cuda_allocators[device] = new CudaAllocator();
  return *cuda_allocators[device];
}

namespace kernels {
struct CudaExecutor;  // kernels/cuda/executor.cuh
}

struct Cuda {
  static constexpr std::size_t alignment = 256;  // what cudaMalloc guarantees
  static constexpr const char* name = "cuda";
  using executor = kernels::CudaExecutor;
  using BatchUploader = cuda::Uploader;  // pinned staging and a copy stream (BatchUpload in tensor/tensor.hpp)
  // Threads per block and the most blocks a grid-stride launch uses.
  static constexpr unsigned block_threads = 256;
  static constexpr unsigned max_blocks = 4096;

  static unsigned blocks_for(std::size_t count) {
    const std::size_t blocks = (count + block_threads - 1) / block_threads;
    return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
  }

  // Storage on the current device. A tensor remembers nothing else: use it on that device.
  template <class T>
  static T* allocate(std::size_t count) {
    if (count == 0) return nullptr;
    const int device = detail::current_cuda_device();
    return static_cast<T*>(cuda_allocator(device).allocate(count * sizeof(T)));
  }
  // From a shared_ptr deleter: must not throw. A process uses one device, so p is almost always
  // the current device's; otherwise the other devices' allocators are asked.
  template <class T>
  static void deallocate(T* p, std::size_t) {
    if (!p) return;
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) (void)cudaGetLastError();
    if (current >= 0 && current < detail::max_cuda_devices && cuda_allocators[current] &&
        cuda_allocators[current]->deallocate(p))
      return;
    for (CudaAllocator* allocator : cuda_allocators)
      if (allocator && allocator->deallocate(p)) return;
  }
  template <class T>
  static void copy_to_host(T* host_dst, const T* src, std::size_t count) {
    if (!count) return;
    const cudaStream_t stream = cuda::current_stream();
    cuda_check(cudaMemcpyAsync(host_dst, src, count * sizeof(T), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync device to host of ", count * sizeof(T), " bytes");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize after a copy to the host");
  }
  // Pageable host memory: CUDA has copied it out before returning (the pinned uploader in
  // device/cuda_upload.hpp overlaps instead).
  template <class T>
  static void copy_from_host(T* dst, const T* host_src, std::size_t count) {
    if (count)
      cuda_check(cudaMemcpyAsync(dst, host_src, count * sizeof(T), cudaMemcpyHostToDevice, cuda::current_stream()),
                 "cudaMemcpyAsync host to device of ", count * sizeof(T), " bytes");
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t count) {
    if (count)
      cuda_check(cudaMemcpyAsync(dst, src, count * sizeof(T), cudaMemcpyDeviceToDevice, cuda::current_stream()),
                 "cudaMemcpyAsync device to device of ", count * sizeof(T), " bytes");
  }
  template <class T>
  static void fill(T* dst, T value, std::size_t count) {
    if (count == 0) return;
    detail::cuda_fill_kernel<T><<<blocks_for(count), block_threads, 0, cuda::current_stream()>>>(dst, value, count);
    cuda_check(cudaGetLastError(), "fill kernel launch (", count, " elements)");
  }
  // Host threads available to work feeding this device (data loading, host-side loops).
  static int threads() { return num_threads(); }

  static AllocatorStats memory_stats() { return cuda_allocator(detail::current_cuda_device()).stats(); }
  static void empty_cache() { cuda_allocator(detail::current_cuda_device()).empty_cache(); }
};

}  // namespace ptrain
