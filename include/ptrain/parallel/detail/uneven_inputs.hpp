#pragma once
// Ranks whose loaders give different numbers of batches in an epoch (a different --limit or
// --batch per rank, an uneven split) would hang: the rank with more batches waits in a gradient
// allreduce the others never start (PyTorch DDP's pytorch#33148). So the ranks agree on the step
// count before each epoch: every rank trains the fewest batches any rank has (as drop_last drops
// a short batch), or, with UnevenInputs::fail, any difference ends every rank. A rank without a
// batch while others have some cannot be reconciled either way.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"

namespace ptrain {

enum class UnevenInputs {
  shortest,  // every rank trains the fewest batches of any rank; the others' extra batches are left out
  fail,      // different counts end every rank with the ranks and their counts
};

namespace detail {

// "5 on ranks 0, 2; 3 on rank 1": each count with the ranks that have it, the largest first.
inline std::string describe_step_counts(std::span<const std::int64_t> counts) {
  std::map<std::int64_t, std::vector<int>, std::greater<>> ranks_of;
  for (std::size_t r = 0; r < counts.size(); ++r) ranks_of[counts[r]].push_back(static_cast<int>(r));
  std::string text;
  for (const auto& [count, ranks] : ranks_of) {
    if (!text.empty()) text += "; ";
    text += std::to_string(count) + (ranks.size() == 1 ? " on rank " : " on ranks ");
    for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return text;
}

// One policy's agreement on the step count, epoch after epoch. `policy` names it in messages
// ("DataParallel", "Pipeline"; its options struct is <policy>Options).
class StepAgreement {
 public:
  StepAgreement(const char* policy, UnevenInputs uneven_inputs) : policy_(policy), uneven_inputs_(uneven_inputs) {}

  // Every rank's local_steps gathered by allgather(std::span<const double> mine, std::span<double> all),
  // then agreed as below.
  template <class Allgather>
  std::int64_t agree(std::int64_t local_steps, int world_size, Allgather&& allgather, bool is_main) {
    std::vector<double> gathered(static_cast<std::size_t>(world_size));
    const double mine = static_cast<double>(local_steps);
    allgather(std::span<const double>(&mine, 1), std::span<double>(gathered));
    const std::vector<std::int64_t> counts(gathered.begin(), gathered.end());
    return agree(counts, is_main);
  }

  // counts: every rank's number of batches this epoch, in rank order (the same on every rank, so
  // every rank returns, or throws, the same). The main rank says once that batches are left out.
  std::int64_t agree(std::span<const std::int64_t> counts, bool is_main) {
    const int epoch = ++epochs_;
    std::int64_t fewest = counts.empty() ? 0 : counts[0], most = fewest;
    for (std::int64_t c : counts) {
      fewest = std::min(fewest, c);
      most = std::max(most, c);
    }
    if (fewest == most) return fewest;
    const std::string counted = policy_ + ": the ranks' loaders give different numbers of batches in epoch " +
                                std::to_string(epoch) + ": " + describe_step_counts(counts);
    check(fewest > 0, counted,
          ". A rank without a batch cannot train in step with the others; give every rank data (DistributedSampler "
          "splits a dataset evenly)");
    check(uneven_inputs_ != UnevenInputs::fail, counted, " (", policy_,
          "Options::uneven_inputs is UnevenInputs::fail; UnevenInputs::shortest trains the fewest)");
    if (is_main && !warned_)
      log_line(counted + "; every rank trains " + std::to_string(fewest) + " (the fewest) and leaves the rest out (said once)",
               stderr);
    warned_ = true;
    return fewest;
  }

 private:
  std::string policy_;
  UnevenInputs uneven_inputs_;
  int epochs_ = 0;
  bool warned_ = false;
};

}  // namespace detail
}  // namespace ptrain
