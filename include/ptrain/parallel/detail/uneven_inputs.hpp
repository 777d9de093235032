#pragma once
// Ranks whose loaders give different numbers of batches in an epoch (a different --limit or
// --batch per rank, an uneven split) would hang: the rank with more batches waits in a gradient
// allreduce the others never start (PyTorch DDP's pytorch#33148). So the ranks agree on the step
// count before each epoch: every rank trains the fewest batches any rank has (as drop_last drops
// a short batch), or, with UnevenInputs::fail, any difference ends every rank. A rank without a
// batch while others have some cannot be reconciled either way.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"

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

struct StepAgreement {
  std::int64_t steps = 0;
  std::string warning;  // non-empty when the ranks differed and the extra batches are left out
};

// counts: every rank's number of batches this epoch, in rank order (the same on every rank, so
// every rank returns, or throws, the same).
inline StepAgreement agree_on_steps(std::span<const std::int64_t> counts, UnevenInputs policy, int epoch) {
  std::int64_t fewest = counts.empty() ? 0 : counts[0], most = fewest;
  for (std::int64_t c : counts) {
    fewest = std::min(fewest, c);
    most = std::max(most, c);
  }
  if (fewest == most) return {fewest, {}};
  const std::string counted = "the ranks' loaders give different numbers of batches in epoch " +
                              std::to_string(epoch + 1) + ": " + describe_step_counts(counts);
  check(fewest > 0, "DataParallel: ", counted,
        ". A rank without a batch cannot train in step with the others; give every rank data (DistributedSampler "
        "splits a dataset evenly)");
  check(policy != UnevenInputs::fail, "DataParallel: ", counted,
        " (DataParallelOptions::uneven_inputs is UnevenInputs::fail; UnevenInputs::shortest trains the fewest)");
  return {fewest, "DataParallel: " + counted + "; every rank trains " + std::to_string(fewest) +
                      " (the fewest) and leaves the rest out"};
}

}  // namespace detail
}  // namespace ptrain
