#pragma once
// executor_for<D>: the executor (kernels/executor.hpp) that runs the ops of device D. Cpu has
// none: its ops call kernels/cpu/ directly. Cuda's is in kernels/cuda/executor_for.cuh (nvcc).
#include <type_traits>

#include "ptrain/device/cpu.hpp"
#include "ptrain/device/host_emulated.hpp"
#include "ptrain/kernels/executor.hpp"

namespace ptrain::kernels {

template <class D>
struct ExecutorFor {
  static_assert(!std::is_same_v<D, D>,
                "this device has no executor: Cpu ops run kernels/cpu/ directly, HostEmulated runs HostExecutor, "
                "and Cuda's CudaExecutor needs ptrain/kernels/cuda/executor_for.cuh (nvcc)");
};
template <>
struct ExecutorFor<HostEmulated> {
  using type = HostExecutor;
};

template <class D>
using executor_for = typename ExecutorFor<D>::type;

// A device whose ops run the executor-generic GPU algorithms (every device but Cpu): the
// constraint that keeps the device ops from competing with the CPU overloads.
template <class D>
concept ExecutorDevice = !std::is_same_v<D, Cpu>;

}  // namespace ptrain::kernels
