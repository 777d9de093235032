#pragma once
// executor_for<D>: the executor (kernels/executor.hpp) that runs the ops of device D, the one D
// names (device/device.hpp). Cuda's, CudaExecutor, is defined in kernels/cuda/executor.cuh (nvcc).
#include "ptrain/device/cpu.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/device/host_emulated.hpp"
#include "ptrain/kernels/executor.hpp"

namespace ptrain::kernels {

template <Device D>
using executor_for = typename D::executor;

}  // namespace ptrain::kernels
