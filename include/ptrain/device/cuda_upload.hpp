#pragma once
// Host tensors to the GPU as torch's pin_memory + non_blocking copies do: the batch is copied into
// a page-locked staging buffer, the DMA runs on a copy stream of its own, and the compute stream
// waits for it with an event, so the host and the compute stream both go on while it travels.
// Two staging buffers alternate: the loader fills one while the other is in flight. It is
// Cuda::BatchUploader, which BatchUpload<Cuda> (tensor/tensor.hpp) and so the Trainer use for every
// batch. nvcc only.
#if !defined(__CUDACC__)
#error "ptrain/device/cuda_upload.hpp uses the CUDA runtime and must be compiled by nvcc"
#endif
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

#include <cuda_runtime.h>

#include "ptrain/device/cuda_check.hpp"
#include "ptrain/device/cuda_stream.hpp"

namespace ptrain::cuda {

// Page-locked host memory (cudaHostAlloc): the GPU reads it by DMA, asynchronously.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes) cuda_check(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault), "cudaHostAlloc of ", bytes, " bytes");
  }
  ~PinnedBuffer() {
    if (data_) (void)cudaFreeHost(data_);
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class Uploader {
 public:
  // Copies bytes of host memory to device_dst, ready for work queued on `compute` after this call.
  void upload(void* device_dst, const void* host_src, std::size_t bytes, cudaStream_t compute = current_stream()) {
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    if (slot.used) slot.copied.synchronize();  // its last batch has left the staging buffer
    if (slot.buffer.bytes() < bytes) slot.buffer = PinnedBuffer(bytes);
    if (bytes) std::memcpy(slot.buffer.data(), host_src, bytes);
    // The destination may have been freed by the compute stream a moment ago and still be read there.
    compute_ready_.record(compute);
    compute_ready_.wait_on(copy_stream_.get());
    if (bytes)
      cuda_check(cudaMemcpyAsync(device_dst, slot.buffer.data(), bytes, cudaMemcpyHostToDevice, copy_stream_.get()),
                 "cudaMemcpyAsync of a ", bytes, "-byte batch to the device");
    slot.copied.record(copy_stream_.get());
    slot.used = true;
    slot.copied.wait_on(compute);
  }

 private:
  struct Slot {
    PinnedBuffer buffer;
    Event copied;
    bool used = false;
  };
  Stream copy_stream_;
  Event compute_ready_;
  std::array<Slot, 2> slots_;
  std::size_t next_ = 0;
};

}  // namespace ptrain::cuda
