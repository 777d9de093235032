#pragma once
// CUDA runtime errors as ptrain::Error, and the question every CUDA program asks first: is there a
// device? require_cuda_device() answers "no CUDA device found" rather than crashing. nvcc only.
#if !defined(__CUDACC__)
#error "ptrain/device/cuda_check.hpp uses the CUDA runtime and must be compiled by nvcc"
#endif
#include <utility>

#include <cuda_runtime.h>

#include "ptrain/core/error.hpp"

namespace ptrain {

// Thrown by require_cuda_device(): no device, or no driver to reach one.
class NoCudaDevice : public Error {
 public:
  using Error::Error;
};

// Throws ptrain::Error naming the call and CUDA's reason when status is not cudaSuccess.
template <class... Parts>
void cuda_check(cudaError_t status, Parts&&... call) {
  if (status == cudaSuccess) return;
  fail(std::forward<Parts>(call)..., " failed: ", cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
}

namespace detail {
// cudaGetDeviceCount with its error cleared; with no driver it fails instead of reporting 0.
inline cudaError_t query_device_count(int& count) {
  count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // so that the next CUDA call does not report it again
    count = 0;
  }
  return status;
}
}  // namespace detail

// Devices visible to this process; 0, not an error, when there is no device or no driver.
inline int cuda_device_count() {
  int count = 0;
  detail::query_device_count(count);
  return count;
}

// The number of devices, or NoCudaDevice whose message starts "no CUDA device found".
inline int require_cuda_device() {
  int count = 0;
  const cudaError_t status = detail::query_device_count(count);
  if (status != cudaSuccess)
    throw NoCudaDevice(detail::concat("no CUDA device found (cudaGetDeviceCount: ", cudaGetErrorString(status), ")"));
  if (count == 0) throw NoCudaDevice("no CUDA device found (cudaGetDeviceCount reports 0 devices)");
  return count;
}

}  // namespace ptrain
