#pragma once
// The ranks' timelines in one Chrome trace file: each rank's spans since the last call reach the
// main rank through the policies' sum over ranks used as an allgather (each rank fills only its own
// slots, the others add zeros); the main rank keeps every rank's events and rewrites the file.
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/timeline.hpp"
#include "ptrain/io/atomic_file.hpp"
#include "ptrain/launch/process_info.hpp"

namespace ptrain::detail {

// sum_over_ranks(std::span<double>) sums in place over every rank; every rank calls this alike.
template <class SumOverRanks>
void write_rank_timelines(Timeline& timeline, std::vector<TimelineEvent>& events, const std::string& path,
                          bool main, SumOverRanks&& sum_over_ranks) {
  const ProcessInfo process = detect_process_info();
  const auto world = static_cast<std::size_t>(process.world_size), rank = static_cast<std::size_t>(process.rank);
  std::vector<double> flat = timeline.flat();
  timeline.clear();
  std::vector<double> counts(2 * world, 0.0);  // each rank's value count, then a 1 from each
  counts[rank] = static_cast<double>(flat.size());
  counts[world + rank] = 1;
  sum_over_ranks(std::span<double>(counts));
  for (std::size_t r = 0; r < world; ++r)
    check(counts[world + r] == 1, "Trainer: the timeline ", path, " cannot tell the ranks apart: ", counts[world + r],
          " processes say they are rank ", r, " of ", world,
          " (the ranks must be started by a launcher that names them, mpiexec or srun, and the policies' reduce "
          "must sum over the whole world)");
  std::vector<std::size_t> begin(world + 1, 0);
  for (std::size_t r = 0; r < world; ++r) begin[r + 1] = begin[r] + static_cast<std::size_t>(counts[r]);
  std::vector<double> all(begin[world], 0.0);
  std::copy(flat.begin(), flat.end(), all.begin() + static_cast<std::ptrdiff_t>(begin[rank]));
  sum_over_ranks(std::span<double>(all));
  if (!main) return;
  for (std::size_t r = 0; r < world; ++r) {
    const auto rank_events =
        Timeline::from_flat(std::span<const double>(all).subspan(begin[r], begin[r + 1] - begin[r]), static_cast<int>(r));
    events.insert(events.end(), rank_events.begin(), rank_events.end());
  }
  const std::string json = chrome_trace_json(events);
  io::write_atomically(path, [&](std::ostream& out) { out << json; });
}

}  // namespace ptrain::detail
