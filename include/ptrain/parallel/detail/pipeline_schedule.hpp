#pragma once
// The order in which one pipeline stage runs the forward and backward passes of a step's
// micro-batches. GPipe: every forward, then every backward. 1F1B (PipeDream-Flush): stage s of S
// runs S-1-s forwards ahead, then alternates one forward and one backward, then drains the
// backwards, so at most S-s micro-batches hold activations at once. Backwards run in micro-batch
// order in both, so every stage ends its step on the same micro-batch.
#include <algorithm>
#include <concepts>
#include <vector>

namespace ptrain {

struct GPipe {
  static constexpr const char* name = "GPipe";
};
struct OneFOneB {
  static constexpr const char* name = "1F1B";
};

// The schedule read when the program runs, from PipelineOptions::schedule: one Pipeline type for
// both, so a program that takes the schedule from a flag instantiates its Trainer once.
struct RuntimeSchedule {};
enum class ScheduleKind { gpipe, one_f_one_b };

template <class S>
concept PipelineSchedule = std::same_as<S, GPipe> || std::same_as<S, OneFOneB> || std::same_as<S, RuntimeSchedule>;

namespace detail {

struct PipelineAction {
  enum Kind { forward, backward } kind;
  int micro_batch;
  bool operator==(const PipelineAction&) const = default;
};

inline std::vector<PipelineAction> stage_actions(ScheduleKind kind, int stage, int stages, int micro_batches) {
  std::vector<PipelineAction> actions;
  const auto fwd = [&](int i) { actions.push_back({PipelineAction::forward, i}); };
  const auto bwd = [&](int i) { actions.push_back({PipelineAction::backward, i}); };
  if (kind == ScheduleKind::gpipe) {
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

template <PipelineSchedule Schedule>
std::vector<PipelineAction> stage_actions(int stage, int stages, int micro_batches) {
  static_assert(!std::same_as<Schedule, RuntimeSchedule>, "RuntimeSchedule: call stage_actions(kind, ...)");
  const ScheduleKind kind = std::same_as<Schedule, GPipe> ? ScheduleKind::gpipe : ScheduleKind::one_f_one_b;
  return stage_actions(kind, stage, stages, micro_batches);
}

inline const char* schedule_name(ScheduleKind kind) { return kind == ScheduleKind::gpipe ? GPipe::name : OneFOneB::name; }

}  // namespace detail
}  // namespace ptrain
