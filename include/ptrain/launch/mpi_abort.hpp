#pragma once
// Ending every rank on a failure: print "rank R: <message>" in one write to stderr, then
// MPI_Abort on the world, which the launcher (mpiexec, srun) turns into the end of all ranks.
// Waiting for the other ranks instead could hang forever in a collective they never reach.
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <mpi.h>

#include "ptrain/core/log.hpp"
#include "ptrain/launch/process_info.hpp"

namespace ptrain {

// Never returns. code is the exit status asked of the launcher (0 becomes 1: this is a failure).
// Before MPI_Init or after MPI_Finalize there is no world to abort: the process exits alone,
// naming itself by rank_before_mpi when given (a launch by URL from flags), else by the
// environment's rank.
[[noreturn]] inline void abort_all(const std::string& message, int code = 1,
                                   std::optional<int> rank_before_mpi = std::nullopt) {
  if (code == 0) code = 1;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  const bool running = initialized && !finalized;
  std::string rank = "?";
  if (running) {
    int r = 0;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &r) == MPI_SUCCESS) rank = std::to_string(r);
  } else if (rank_before_mpi) {
    rank = std::to_string(*rank_before_mpi);
  } else {
    try {
      rank = std::to_string(detect_process_info().rank);
    } catch (...) {
    }
  }
  std::fflush(stdout);
  log_line("rank " + rank + ": " + message, stderr);
  // The launcher forwards our output through a pipe; MPI_Abort makes it kill every process, and
  // a message still in the pipe was lost now and then (seen under load). Give it a moment.
  if (running) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (running) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace ptrain
