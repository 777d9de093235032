#pragma once
// A Task is what a model is trained to do: the loss of a step and the metrics of an epoch. The
// Trainer (and the Pipeline's last stage) hold one and ask it, for a batch of model output
// `output` (a Var<T, D> on the model's device) and its host `targets`:
//
//   typename target_type             the targets of a batch: any type (class indices
//                                    std::vector<std::int64_t>, a Tensor<std::int64_t> [N, H, W]
//                                    of masks, a Tensor<std::int64_t> [N, L] of tokens, a tuple)
//   rows(targets) -> int64           the batch's samples (rows of the inputs)
//   slice(targets, begin, end)       the targets of rows [begin, end): the pipeline's micro-batches
//   loss_weight(targets) -> double   what the loss is a mean over (samples, pixels, tokens not
//                                    ignored): micro-batch losses are weighed by it, and the epoch's
//                                    loss is sum(loss * weight) / sum(weight)
//   loss(output, targets, grad_scale) -> Var<T, D>
//                                    the loss, a scalar [], whose backward sends grad_scale times
//                                    its gradient to output. grad_scale (mixed precision's loss
//                                    scale, 1/k under gradient accumulation, a micro-batch's share)
//                                    must be applied in float on the way back, never to the loss's
//                                    value (fp16 ends at 65504): cross_entropy's grad_scale, or
//                                    scale_gradient(output, grad_scale) before any other loss
//   state_size() -> size_t           the length of the metric state: sums and counts, added over
//                                    batches and over data-parallel ranks (any Communicator's
//                                    allreduce_sum adds them; EpochTotals::metric_state holds them)
//   accumulate(scores, targets, loss, state)
//                                    adds one batch into state (a std::span<double>); scores is
//                                    output's Tensor<T, D>, loss the batch's loss value
//   metric_names() -> vector<string> the names of the metric values, for the epoch line, the CSV
//                                    header (train_<name>, val_<name>) and EpochResult
//   metric_values(state) -> vector<double>  one value per name from a (reduced) state
//
// Optionally batch_targets(batch) -> target_type makes the targets out of a loader's batch; without
// it the Trainer uses batch.targets. Only scalars come back to the host from the device: the loss's
// value, and what accumulate counts (metrics.hpp copies scores to the host to count them).
//
// The tasks of the library: Classification (tasks/classification.hpp), Segmentation
// (tasks/segmentation.hpp), SequenceModelling (tasks/sequence_modelling.hpp) and MultiHead
// (tasks/multi_head.hpp); docs/policies.md, "Tasks", writes a new one.
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/device/cpu.hpp"
#include "ptrain/tasks/epoch_totals.hpp"

namespace ptrain {

template <class X, class T = float, class D = Cpu>
concept Task = std::copy_constructible<X> &&
               requires(const X& task, const Var<T, D>& output, const Tensor<T, D>& scores,
                        const typename X::target_type& targets, double grad_scale, double loss,
                        std::span<double> state, std::span<const double> reduced, std::int64_t row) {
                 { task.rows(targets) } -> std::convertible_to<std::int64_t>;
                 { task.slice(targets, row, row) } -> std::convertible_to<typename X::target_type>;
                 { task.loss_weight(targets) } -> std::convertible_to<double>;
                 { task.loss(output, targets, grad_scale) } -> std::same_as<Var<T, D>>;
                 { task.state_size() } -> std::convertible_to<std::size_t>;
                 task.accumulate(scores, targets, loss, state);
                 { task.metric_names() } -> std::convertible_to<std::vector<std::string>>;
                 { task.metric_values(reduced) } -> std::convertible_to<std::vector<double>>;
               };

// Each broken rule of Task as its own sentence, where the Trainer takes a task.
template <class X, class T, class D>
struct TaskContract {
  static_assert(std::copy_constructible<X>, "Trainer task: a task must be copy-constructible (the Trainer and the "
                                            "Pipeline's last stage each hold one); see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task, const typename X::target_type& targets) {
    { task.rows(targets) } -> std::convertible_to<std::int64_t>;
  }, "Trainer task: rows must be callable as `std::int64_t rows(const target_type& targets) const` (the batch's "
     "samples); add or fix it; see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task, const typename X::target_type& targets, std::int64_t row) {
    { task.slice(targets, row, row) } -> std::convertible_to<typename X::target_type>;
  }, "Trainer task: slice must be callable as `target_type slice(const target_type& targets, std::int64_t begin, "
     "std::int64_t end) const` (a pipeline's micro-batches); add or fix it; see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task, const typename X::target_type& targets) {
    { task.loss_weight(targets) } -> std::convertible_to<double>;
  }, "Trainer task: loss_weight must be callable as `double loss_weight(const target_type& targets) const` (what "
     "the loss is a mean over); add or fix it; see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task, const Var<T, D>& output, const typename X::target_type& targets, double s) {
    { task.loss(output, targets, s) } -> std::same_as<Var<T, D>>;
  }, "Trainer task: loss must be callable as `Var<T, D> loss(const Var<T, D>& output, const target_type& targets, "
     "double grad_scale) const` for the model's scalar type T and device D; add or fix it; see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task) {
    { task.state_size() } -> std::convertible_to<std::size_t>;
  }, "Trainer task: state_size must be callable as `std::size_t state_size() const` (the length of the metric "
     "state); add or fix it; see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task, const Tensor<T, D>& scores, const typename X::target_type& targets,
                         double loss, std::span<double> state) { task.accumulate(scores, targets, loss, state); },
                "Trainer task: accumulate must be callable as `void accumulate(const Tensor<T, D>& scores, const "
                "target_type& targets, double loss, std::span<double> state) const` (adds one batch into the "
                "metric state); add or fix it; see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task) {
    { task.metric_names() } -> std::convertible_to<std::vector<std::string>>;
  }, "Trainer task: metric_names must be callable as `std::vector<std::string> metric_names() const` (the names of "
     "the metric values); add or fix it; see ptrain/tasks/task.hpp");
  static_assert(requires(const X& task, std::span<const double> reduced) {
    { task.metric_values(reduced) } -> std::convertible_to<std::vector<double>>;
  }, "Trainer task: metric_values must be callable as `std::vector<double> metric_values(std::span<const double> "
     "state) const` (one value per metric_names() entry, from the state summed over batches and ranks); add or fix "
     "it; see ptrain/tasks/task.hpp");
  static constexpr bool satisfied = Task<X, T, D>;
};

// A type that names its targets is meant as a task (the Trainer tells tasks from policies by it).
template <class X>
concept NamesTargets = requires { typename X::target_type; };

// Metric values by name, in the task's order.
struct MetricValues {
  std::vector<std::string> names;
  std::vector<double> values;

  bool empty() const { return names.empty(); }
  double at(std::string_view name) const;
};

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE double MetricValues::at(std::string_view name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return values[i];
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  fail("MetricValues: no metric named '", name, "'; the task's metrics are: ", known.empty() ? "(none)" : known);
}
#endif

template <class X>
MetricValues metric_values(const X& task, const EpochTotals& totals) {
  std::vector<double> state = totals.metric_state;
  state.resize(task.state_size(), 0.0);  // an epoch without batches
  return {task.metric_names(), task.metric_values(std::span<const double>(state))};
}

// The sums of one batch (or micro-batch): its loss times its weight, and its metric state.
template <class X, class T, class D>
EpochTotals batch_totals(const X& task, const Var<T, D>& output, const typename X::target_type& targets,
                         const Var<T, D>& loss) {
  EpochTotals totals;
  const double value = static_cast<double>(loss.value().to_vector()[0]);
  totals.loss_weight = task.loss_weight(targets);
  totals.loss_sum = totals.loss_weight > 0 ? value * totals.loss_weight : 0.0;
  totals.samples = static_cast<double>(task.rows(targets));
  totals.metric_state.assign(task.state_size(), 0.0);
  task.accumulate(output.value(), targets, value, std::span<double>(totals.metric_state));
  return totals;
}

}  // namespace ptrain
