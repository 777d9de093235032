#pragma once
// DataParallel<MpiAllreduce, ...>: gradients reduced over MPICH through MpiComm.
#include "ptrain/comm/mpi_comm.hpp"
#include "ptrain/parallel/backends.hpp"

namespace ptrain {

struct MpiAllreduce {
  using communicator = MpiComm;
  static constexpr const char* name = "mpi";
};

}  // namespace ptrain
