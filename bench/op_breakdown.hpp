#pragma once
// A bench's timed steps by kernel family (core/op_profile.hpp), one line each, then the rest of
// the step (autograd and allocation), all as the mean over the timed steps:
//   bench=<name> family=<family> ms_per_step=...
#include <cstdio>
#include <vector>

#include <ptrain/core/op_profile.hpp>

namespace bench {

inline void print_op_breakdown(const char* name, const ptrain::OpProfile& profile, const std::vector<double>& seconds) {
  if (seconds.empty()) return;
  const double steps = static_cast<double>(seconds.size());
  double total_ms = 0;
  for (double t : seconds) total_ms += 1e3 * t / steps;
  for (const auto& [family, time] : profile.families())
    std::printf("bench=%s family=%s ms_per_step=%.1f\n", name, family.c_str(), time.self_us / 1e3 / steps);
  std::printf("bench=%s family=autograd_and_allocation ms_per_step=%.1f\n", name,
              total_ms - profile.self_us() / 1e3 / steps);
}

}  // namespace bench
