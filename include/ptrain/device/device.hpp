#pragma once
// The Device concept: where a tensor's elements live and how its ops run. This comment is the
// one place the contract is written down; test/device/device_concept_test.cpp compiles an
// archetype against it. Models: Cpu (device/cpu.hpp), HostEmulated (device/host_emulated.hpp),
// Cuda (device/cuda.hpp, nvcc only).
//
// A device is a value type with static members only (no state of its own):
//   D::name                               a short name for messages ("cpu", "cuda")
//   D::allocate<T>(count) -> T*           uninitialised storage for count elements (nullptr for 0)
//   D::deallocate<T>(p, count)            frees what allocate returned (p may be nullptr)
//   D::copy_to_host(host_dst, src, count) device -> host; the host values are ready on return
//   D::copy_from_host(dst, host_src, count)  host -> device
//   D::copy(dst, src, count)              device -> device
//   D::fill(dst, value, count)            every element set to value
//   D::executor                           the type that runs the device's kernels
//                                         (kernels/executor.hpp: indexed, row_reduction, gemm,
//                                         buffer), named here, defined in kernels/
//
// The executor is what makes one op serve every device: an op is written once over
// Var<T, D>, and each kernel family's dispatch point sends executor_for<Cpu> to the tuned
// kernels of kernels/cpu/ and any other executor to the algorithms of kernels/indexed/.
#include <concepts>
#include <cstddef>

namespace ptrain {

template <class D>
concept Device = requires(float* dst, const float* src, float value, std::size_t count) {
  { D::name } -> std::convertible_to<const char*>;
  { D::template allocate<float>(count) } -> std::same_as<float*>;
  D::template deallocate<float>(dst, count);
  D::copy_to_host(dst, src, count);
  D::copy_from_host(dst, src, count);
  D::copy(dst, src, count);
  D::fill(dst, value, count);
  typename D::executor;
};

}  // namespace ptrain
