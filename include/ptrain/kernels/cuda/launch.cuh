#pragma once
// Launches the index-space kernels of kernels/indexed.hpp on the GPU: a grid-stride loop for an
// indexed functor, a block per row (cub's block reduction) for a row reduction. Both are queued
// on the calling thread's current stream.
#if !defined(__CUDACC__)
#error "ptrain/kernels/cuda/launch.cuh holds CUDA kernels and must be compiled by nvcc"
#endif
#include <cstdint>

#include <cub/block/block_reduce.cuh>
#include <cuda_runtime.h>

#include "ptrain/device/cuda_check.hpp"
#include "ptrain/device/cuda_stream.hpp"
#include "ptrain/kernels/indexed.hpp"

namespace ptrain::kernels::cuda {

inline constexpr unsigned block_threads = 256;
inline constexpr unsigned max_blocks = 65535;

inline unsigned blocks_for(std::int64_t work) {
  const std::int64_t blocks = (work + block_threads - 1) / block_threads;
  return static_cast<unsigned>(blocks < max_blocks ? (blocks > 0 ? blocks : 1) : max_blocks);
}

template <class F>
__global__ void indexed_kernel(std::int64_t n, F f) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

template <class F>
__global__ void row_reduction_kernel(std::int64_t rows, std::int64_t length, F f) {
  using A = typename F::accumulator;
  using BlockReduce = cub::BlockReduce<A, block_threads>;
  __shared__ typename BlockReduce::TempStorage scratch;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    A partial = f.identity();
    for (std::int64_t j = threadIdx.x; j < length; j += blockDim.x) partial = f.combine(partial, f.term(row, j));
    const A total = BlockReduce(scratch).Reduce(partial, [&f](const A& a, const A& b) { return f.combine(a, b); });
    if (threadIdx.x == 0) f.finish(row, total);
    __syncthreads();  // scratch is reused by the next row
  }
}

// f(i) for i in [0, n) on the current stream.
template <IndexedKernel F>
void launch_indexed(std::int64_t n, const F& f, cudaStream_t stream = ptrain::cuda::current_stream()) {
  if (n <= 0) return;
  indexed_kernel<<<blocks_for(n), block_threads, 0, stream>>>(n, f);
  cuda_check(cudaGetLastError(), "indexed kernel launch (", n, " elements)");
}

// Each of `rows` rows folded over `length` terms, on the current stream.
template <RowReduction F>
void launch_row_reduction(std::int64_t rows, std::int64_t length, const F& f,
                          cudaStream_t stream = ptrain::cuda::current_stream()) {
  if (rows <= 0) return;
  const unsigned grid = static_cast<unsigned>(rows < max_blocks ? rows : max_blocks);
  row_reduction_kernel<<<grid, block_threads, 0, stream>>>(rows, length, f);
  cuda_check(cudaGetLastError(), "row reduction launch (", rows, " rows of ", length, ")");
}

}  // namespace ptrain::kernels::cuda
