#pragma once
// HostEmulated: host memory exactly as Cpu's, but a device of its own whose ops run the GPU
// algorithms (kernels/indexed/) through HostExecutor: how the tests run the GPU autograd path
// on a machine without a GPU. Its allocations count in Cpu::live_bytes().
#include "ptrain/device/cpu.hpp"

namespace ptrain {

namespace kernels {
struct HostExecutor;  // kernels/executor.hpp
}

struct HostEmulated : Cpu {
  static constexpr const char* name = "host-emulated";
  using executor = kernels::HostExecutor;
};

}  // namespace ptrain
