#pragma once
// Where a step's CPU time goes, by kernel family: the self time (its own, less the families it
// called) and the calls of each, as the "Self CPU" column of torch.profiler's table. Off unless an
// OpProfileScope makes a profile active on the calling thread; the kernels' dispatch points open a
// ProfiledOp, which off costs one thread-local read. Only the thread that dispatches is timed: the
// OpenMP workers inside a kernel count toward the kernel that started them.
//
//   OpProfile profile;
//   { OpProfileScope on(profile); train_step(); }
//   for (const auto& [family, time] : profile.families()) ... time.self_us, time.calls
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace ptrain {

struct OpTime {
  std::int64_t calls = 0;
  double self_us = 0;
};

class OpProfile {
 public:
  void add(const char* family, double self_us) {
    OpTime& time = families_[family];
    ++time.calls;
    time.self_us += self_us;
  }
  const std::map<std::string, OpTime>& families() const { return families_; }
  double self_us() const {
    double total = 0;
    for (const auto& [family, time] : families_) total += time.self_us;
    return total;
  }
  void clear() { families_.clear(); }

 private:
  std::map<std::string, OpTime> families_;
};

class ProfiledOp;

namespace detail {
struct OpProfileState {
  OpProfile* profile = nullptr;
  ProfiledOp* innermost = nullptr;
};
inline OpProfileState& op_profile_state() {
  thread_local OpProfileState state;
  return state;
}
}  // namespace detail

class OpProfileScope {
 public:
  explicit OpProfileScope(OpProfile& profile) : previous_(detail::op_profile_state().profile) {
    detail::op_profile_state().profile = &profile;
  }
  ~OpProfileScope() { detail::op_profile_state().profile = previous_; }
  OpProfileScope(const OpProfileScope&) = delete;
  OpProfileScope& operator=(const OpProfileScope&) = delete;

 private:
  OpProfile* previous_;
};

// Times the enclosing scope as `family`. An Outermost op (the executor's GEMM and indexed loops,
// which the named kernels also call) counts only when no other op encloses it.
class ProfiledOp {
 public:
  enum Nesting { Nested, Outermost };

  explicit ProfiledOp(const char* family, Nesting nesting = Nested) {
    detail::OpProfileState& state = detail::op_profile_state();
    if (!state.profile || (nesting == Outermost && state.innermost)) return;
    family_ = family;
    enclosing_ = state.innermost;
    state.innermost = this;
    start_ = std::chrono::steady_clock::now();
  }
  ~ProfiledOp() {
    if (!family_) return;
    const double total_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
    detail::OpProfileState& state = detail::op_profile_state();
    state.profile->add(family_, total_us - children_us_);
    if (enclosing_) enclosing_->children_us_ += total_us;
    state.innermost = enclosing_;
  }
  ProfiledOp(const ProfiledOp&) = delete;
  ProfiledOp& operator=(const ProfiledOp&) = delete;

 private:
  const char* family_ = nullptr;
  ProfiledOp* enclosing_ = nullptr;
  double children_us_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ptrain
