#pragma once
// How a rank polls while it waits for the others (MpiComm, comm/detail/mpi_watch.hpp), as
// OMP_WAIT_POLICY says it for OpenMP's threads. Active: spin for the watchdog's first second
// (comm/collective_watchdog.hpp), as MPICH does, so that MPI moves a large reduction's bytes as fast
// as its blocking calls. Passive: sleep between polls from the start, 20 µs doubling to 1 ms,
// leaving the core to a rank that is still computing. Spinning pays only while every rank has a
// core of its own: on a node running more ranks (times their threads) than it has cores, a spinning
// rank takes the core of one that computes, and a suite of Sharded tests ran 3x slower at 3 and 4
// ranks on 2 cores than with passive waits.
// PTRAIN_WAIT_POLICY: active, passive, or auto (the default when unset): passive where the node is
// oversubscribed, active elsewhere.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "ptrain/core/error.hpp"

namespace ptrain {

enum class WaitPolicy { active, passive };

// The policy for `local_ranks` ranks on this node, each of `threads_per_rank` threads, on `cores`
// cores, with `setting` the value of PTRAIN_WAIT_POLICY (null or empty: auto).
inline WaitPolicy wait_policy_for(const char* setting, int local_ranks, int threads_per_rank, int cores) {
  const std::string policy = setting ? setting : "";
  if (policy == "active") return WaitPolicy::active;
  if (policy == "passive") return WaitPolicy::passive;
  check(policy.empty() || policy == "auto", "PTRAIN_WAIT_POLICY='", policy,
        "': expected active, passive or auto (how a rank polls while it waits for the others)");
  const long busy = static_cast<long>(local_ranks) * static_cast<long>(threads_per_rank);
  return busy > cores ? WaitPolicy::passive : WaitPolicy::active;
}

// The cores this process may run on (its CPU affinity, as taskset or Slurm set it).
inline int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace detail {
// A passive poll: done(), else a sleep that doubles from 20 µs to 1 ms over the calls.
template <class Done>
class PassivePoll {
 public:
  explicit PassivePoll(Done& done) : done_(done) {}
  bool operator()() {
    if (done_()) return true;
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
    return false;
  }

 private:
  Done& done_;
  std::chrono::microseconds sleep_{20};
};
}  // namespace detail

}  // namespace ptrain
