#pragma once
// --device cpu|cuda. The examples' CUDA builds (NAME_cuda, the same source compiled by nvcc) train
// on a GPU and default to it; a host-compiled build trains on the CPU only. Either exits with
// code 2 and a sentence, before MPI starts, when the device asked for cannot be used: an unknown
// name (refused by the Cli), cuda in a build without CUDA, or "no CUDA device found".
#include <cstdio>
#include <optional>
#include <string>

#include "cli.hpp"

#if defined(__CUDACC__)
#include <ptrain/comm/nccl_comm.hpp>
#include <ptrain/device/cuda_check.hpp>
#include <ptrain/launch/mpi_session.hpp>
#endif

namespace examples {

enum class DeviceKind { cpu, cuda };

#if defined(__CUDACC__)
inline constexpr bool built_with_cuda = true;
#else
inline constexpr bool built_with_cuda = false;
#endif

inline void add_device_option(Cli& cli) {
  cli.choice_option("--device", built_with_cuda ? "cuda" : "cpu", {"cpu", "cuda"},
                    built_with_cuda ? "the device; cuda: one GPU per rank of a node"
                                    : "the device (cuda needs the CUDA build of this example, PROGRAM_cuda)");
}

// The device --device names (cpu or cuda, checked by the Cli), or nothing after printing why it
// cannot be used (exit code 2).
inline std::optional<DeviceKind> choose_device(const Cli& cli, const std::string& program) {
  if (cli.str("--device") == "cpu") return DeviceKind::cpu;
#if defined(__CUDACC__)
  try {
    ptrain::require_cuda_device();
  } catch (const ptrain::NoCudaDevice& e) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return std::nullopt;
  }
  return DeviceKind::cuda;
#else
  std::fprintf(stderr,
               "%s: --device cuda: this build has no CUDA; build %s_cuda (configure with a CUDA toolkit, "
               "-DPTRAIN_CUDA=ON)\n",
               program.c_str(), program.c_str());
  return std::nullopt;
#endif
}

#if defined(__CUDACC__)
// Each rank on its GPU of the node (made current before f builds the model), NCCL among them:
// returns f(nccl).
template <class F>
auto on_local_gpus(ptrain::MpiSession& session, ptrain::MpiComm& world, F&& f) {
  const int device = ptrain::select_local_cuda_device(session.info());
  ptrain::NcclComm nccl(world, device);
  return f(nccl);
}
#endif

}  // namespace examples
