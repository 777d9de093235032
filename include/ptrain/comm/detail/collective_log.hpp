#pragma once
// CollectiveLog: the collectives one rank started on a communicator since the last check, each
// as "#12 allreduce_sum of 1000 float (bucket 3)": operation, element type, count, root or label.
// The ranks compare their logs (MpiComm::check_collectives, comm/detail/same_sequence.hpp): two
// ranks that started different collectives, which MPI may match anyway when the sizes agree, are
// found there and named with both entries. The log is kept until the first check (DataParallel's
// setup) and then only when PTRAIN_DEBUG_COLLECTIVES=1 asks for a check every step, so that
// training pays nothing for it by default.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"

namespace ptrain {

// Whether PTRAIN_DEBUG_COLLECTIVES=1 asks for the collectives to be compared across ranks every step.
inline bool debug_collectives() {
  const char* text = std::getenv("PTRAIN_DEBUG_COLLECTIVES");
  if (!text || !*text) return false;
  const std::string value(text);
  check(value == "0" || value == "1", "PTRAIN_DEBUG_COLLECTIVES='", value,
        "' is not 0 or 1 (1 compares every rank's collectives after each training step)");
  return value == "1";
}

namespace detail {

class CollectiveLog {
 public:
  CollectiveLog() : every_step_(debug_collectives()) {}

  bool every_step() const { return every_step_; }
  void record(std::uint64_t number, const std::string& what) {
    if (!recording_) return;
    if (entries_.size() < capacity) entries_.push_back("#" + std::to_string(number) + " " + what);
    else ++left_out_;
  }
  // The entries since the last call; from now on the log records only when every_step().
  std::vector<std::string> take() {
    std::vector<std::string> out = std::exchange(entries_, {});
    if (left_out_) out.push_back(std::to_string(std::exchange(left_out_, 0)) + " more collectives, not recorded");
    recording_ = every_step_;
    return out;
  }

 private:
  static constexpr std::size_t capacity = 100000;
  std::vector<std::string> entries_;
  std::uint64_t left_out_ = 0;
  bool every_step_;
  bool recording_ = true;
};

}  // namespace detail
}  // namespace ptrain
