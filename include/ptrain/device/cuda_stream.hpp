#pragma once
// CUDA streams and events as RAII values, and the stream this thread's kernels and copies are
// queued on (the legacy default stream unless a CurrentStream scope says otherwise). nvcc only.
#if !defined(__CUDACC__)
#error "ptrain/device/cuda_stream.hpp uses the CUDA runtime and must be compiled by nvcc"
#endif
#include <utility>

#include <cuda_runtime.h>

#include "ptrain/device/cuda_check.hpp"

namespace ptrain::cuda {

// A non-blocking stream: it does not synchronise with the legacy default stream, so work on it
// (NCCL's collectives, the loader's copies) overlaps the compute stream.
class Stream {
 public:
  Stream() { cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  ~Stream() {
    if (stream_) (void)cudaStreamDestroy(stream_);
  }
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  cudaStream_t get() const { return stream_; }
  void synchronize() const { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t stream_ = nullptr;
};

// A point in a stream's work: record() marks it, wait_on() makes another stream wait for it
// without blocking the host.
class Event {
 public:
  Event() { cuda_check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); }
  ~Event() {
    if (event_) (void)cudaEventDestroy(event_);
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  void record(cudaStream_t stream) { cuda_check(cudaEventRecord(event_, stream), "cudaEventRecord"); }
  void wait_on(cudaStream_t stream) const {
    cuda_check(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
  }
  void synchronize() const { cuda_check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  bool done() const {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    cuda_check(status, "cudaEventQuery");
    return true;
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

namespace detail {
inline cudaStream_t& current_stream_slot() {
  thread_local cudaStream_t stream = nullptr;
  return stream;
}
}  // namespace detail

inline cudaStream_t current_stream() { return detail::current_stream_slot(); }

// Queues this thread's kernels and copies on `stream` for the scope's lifetime.
class CurrentStream {
 public:
  explicit CurrentStream(cudaStream_t stream) : previous_(std::exchange(detail::current_stream_slot(), stream)) {}
  ~CurrentStream() { detail::current_stream_slot() = previous_; }
  CurrentStream(const CurrentStream&) = delete;
  CurrentStream& operator=(const CurrentStream&) = delete;

 private:
  cudaStream_t previous_;
};

}  // namespace ptrain::cuda
