#pragma once
// The umbrella header with MPI: the CPU library plus launching under mpiexec/srun or by URL (MpiSession,
// run_main, abort_all) and the MPICH communicator (MpiComm). Needs the ptrain::mpi CMake target.
#include "ptrain/ptrain.hpp"

#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/mpi_comm.hpp"
#include "ptrain/comm/self_comm.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/launch/mpi_abort.hpp"
#include "ptrain/launch/mpi_main.hpp"
#include "ptrain/launch/mpi_session.hpp"
#include "ptrain/launch/mpi_types.hpp"
#include "ptrain/launch/process_info.hpp"
#include "ptrain/launch/url_launch.hpp"
#include "ptrain/launch/url_rendezvous.hpp"
#include "ptrain/parallel/mpi_allreduce.hpp"
