#pragma once
// Backend tags name the communicator a policy reduces over. MpiAllreduce lives in
// ptrain/parallel/mpi_allreduce.hpp (it needs MPI), NcclAllreduce in ptrain/parallel/nccl_allreduce.hpp
// (nvcc: it reduces GPU memory).
#include <concepts>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/self_comm.hpp"

namespace ptrain {

// A world of one: the policy's code path runs, the reduction is a copy. For tests and for a
// program that runs the same binary with and without mpiexec.
struct SelfAllreduce {
  using communicator = SelfComm;
  static constexpr const char* name = "self";
};

template <class B>
concept Backend = requires { typename B::communicator; } && Communicator<typename B::communicator>;

}  // namespace ptrain
