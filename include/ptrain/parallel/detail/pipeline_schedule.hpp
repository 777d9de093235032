#pragma once
// The order in which one pipeline stage runs the forward and backward passes of a step's
// micro-batches. GPipe: every forward, then every backward. 1F1B (PipeDream-Flush): stage s of S
// runs S-1-s forwards ahead, then alternates one forward and one backward, then drains the
// backwards, so at most S-s micro-batches hold activations at once. Backwards run in micro-batch
// order in both, so every stage ends its step on the same micro-batch.
#include <algorithm>
#include <vector>

namespace ptrain {

struct GPipe {
  static constexpr const char* name = "GPipe";
};
struct OneFOneB {
  static constexpr const char* name = "1F1B";
};

template <class S>
concept PipelineSchedule = std::same_as<S, GPipe> || std::same_as<S, OneFOneB>;

namespace detail {

struct PipelineAction {
  enum Kind { forward, backward } kind;
  int micro_batch;
  bool operator==(const PipelineAction&) const = default;
};

template <PipelineSchedule Schedule>
std::vector<PipelineAction> stage_actions(int stage, int stages, int micro_batches) {
  std::vector<PipelineAction> actions;
  const auto fwd = [&](int i) { actions.push_back({PipelineAction::forward, i}); };
  const auto bwd = [&](int i) { actions.push_back({PipelineAction::backward, i}); };
  if constexpr (std::same_as<Schedule, GPipe>) {
    for (int i = 0; i < micro_batches; ++i) fwd(i);
    for (int i = 0; i < micro_batches; ++i) bwd(i);
  } else {
    const int warmup = std::min(stages - 1 - stage, micro_batches);
    for (int i = 0; i < warmup; ++i) fwd(i);
    for (int i = warmup; i < micro_batches; ++i) {
      fwd(i);
      bwd(i - warmup);
    }
    for (int i = micro_batches - warmup; i < micro_batches; ++i) bwd(i);
  }
  return actions;
}

}  // namespace detail
}  // namespace ptrain
