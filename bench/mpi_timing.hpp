#pragma once
// What the multi-rank benches time with: the median of a run of timings, the slowest rank's time,
// a count from the environment, and a barrier an idle rank waits at asleep.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include <mpi.h>

namespace ptrain::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The environment's value of `name` (at least 1), else `fallback`.
inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::max(1, std::atoi(v)) : fallback;
}

// Waits for every rank at a non-blocking barrier, sleeping between polls: an idle rank that
// leaves its core to the others (MPI_Barrier would spin).
inline void sleep_at_barrier(MPI_Comm comm) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

inline double slowest(double seconds, MPI_Comm comm) {
  double max = 0;
  MPI_Allreduce(&seconds, &max, 1, MPI_DOUBLE, MPI_MAX, comm);
  return max;
}

}  // namespace ptrain::bench
