#pragma once
// CollectiveWatchdog: how every communicator waits for a collective (or a message) to complete.
// A rank that stops (SIGSTOP, a deadlock, a skipped collective) would otherwise leave the others
// waiting forever at 100% CPU. The watchdog polls the operation, spinning for a second and then
// sleeping between polls (so a rank waiting for a stalled peer leaves its core to others), and
// calls expired() once the wait has lasted PTRAIN_COLLECTIVE_TIMEOUT seconds (default 300);
// expired() names the collective and the ranks that have not joined, and ends every rank
// (MpiComm: detail/mpi_stall_report.hpp; NcclComm: its own, around the host waits it has).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "ptrain/core/error.hpp"

namespace ptrain {

// The seconds PTRAIN_COLLECTIVE_TIMEOUT asks for (a positive number), 300 when it is unset.
inline double collective_timeout_seconds() {
  const char* text = std::getenv("PTRAIN_COLLECTIVE_TIMEOUT");
  if (!text || !*text) return 300.0;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  check(end && *end == '\0' && seconds > 0 && seconds <= 1e9, "PTRAIN_COLLECTIVE_TIMEOUT='", text,
        "' is not a number of seconds in (0, 1e9]; it bounds how long a rank waits for the others in a collective");
  return seconds;
}

class CollectiveWatchdog {
 public:
  explicit CollectiveWatchdog(double timeout_seconds = collective_timeout_seconds()) : timeout_(timeout_seconds) {
    check(timeout_seconds > 0, "CollectiveWatchdog: the timeout must be positive, got ", timeout_seconds, " s");
  }
  double timeout_seconds() const { return timeout_; }

  // Polls done() until it returns true. idle() runs between polls (MpiComm answers the other ranks'
  // questions there); expired() runs once timeout_seconds() have passed and must not return.
  // Polls spin for the first spin_time, then sleep for an interval that doubles up to max_sleep.
  // MPI moves a waiting rank's bytes only inside a poll: sleeping from 2 ms on made a 45 MB
  // allreduce 1.5-2x slower (bench/allreduce.cpp), so every wait a healthy job makes (a large
  // reduction, a straggler's batch) spins as MPICH does, and only a wait past a second sleeps.
  template <class Done, class Idle, class Expired>
  void wait(Done&& done, Idle&& idle, Expired&& expired) const {
    using clock = std::chrono::steady_clock;
    constexpr auto spin_time = std::chrono::milliseconds(1000);
    constexpr auto max_sleep = std::chrono::microseconds(1000);
    if (done()) return;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_));
    auto sleep = std::chrono::microseconds(20);
    while (!done()) {
      const auto now = clock::now();
      if (now >= deadline) {
        expired();
        fail("CollectiveWatchdog: the timeout handler returned");  // expired() must end the process
      }
      idle();
      if (now - start > spin_time) {
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2, max_sleep);
      }
    }
  }

 private:
  double timeout_;
};

}  // namespace ptrain
