#pragma once
// DataParallel<NcclAllreduce, ...>: gradients of a Var<T, Cuda> model reduced in GPU memory over
// NCCL through NcclComm. nvcc only (link ptrain::cuda and ptrain::mpi).
#include "ptrain/comm/nccl_comm.hpp"
#include "ptrain/parallel/backends.hpp"

namespace ptrain {

struct NcclAllreduce {
  using communicator = NcclComm;
  static constexpr const char* name = "nccl";
};

static_assert(Backend<NcclAllreduce>);
static_assert(Communicator<NcclComm>);

}  // namespace ptrain
