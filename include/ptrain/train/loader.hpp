#pragma once
// The Loader concept: what Trainer::fit, train_epoch and evaluate need of a loader, written once
// (test/train/loader_concept_test.cpp compiles an archetype of it).
//
// evaluate needs the batches alone (BatchesFor); fit and train_epoch also (Loader):
//   loader.set_epoch(epoch)          before each training epoch (a sampler's shuffle; may do nothing)
//   loader.size() -> size_t          the batches of an epoch on this rank
//   for (const auto& batch : loader) the epoch's batches: batch.inputs a Tensor<U> of any scalar
//                                    U (cast to the model's), and the targets: batch.targets as the
//                                    task's target_type, or what the task's batch_targets(batch) makes
//
// Optionally (ResumesMidEpoch) loader.set_first_batch(b) begins the next epoch at batch b, so a run
// resumed mid-epoch does not read the batches before it (without it they are read and left out).
// DataLoader (data/loader.hpp), BpttBatches and the pretraining batches are loaders.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <type_traits>

#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

namespace detail {
template <class X>
struct IsTensor : std::false_type {};
template <class U, class D>
struct IsTensor<Tensor<U, D>> : std::true_type {};
}  // namespace detail

// A loader's batch as a task takes it: inputs a Tensor, targets the task's (batch.targets, or
// what task.batch_targets(batch) makes).
template <class Batch, class TaskType>
concept BatchFor =
    detail::IsTensor<std::remove_cvref_t<decltype(std::declval<const Batch&>().inputs)>>::value &&
    (requires(const TaskType& task, const Batch& batch) {
      { task.batch_targets(batch) } -> std::convertible_to<typename TaskType::target_type>;
    } || requires(const Batch& batch) {
      { batch.targets } -> std::convertible_to<typename TaskType::target_type>;
    });

// begin() and end() as a range-for takes them (an iterator need not be a std::input_iterator).
template <class L>
concept BatchRange = requires(L& loader) {
  { loader.begin() != loader.end() } -> std::convertible_to<bool>;
  *loader.begin();
  ++std::declval<decltype(loader.begin())&>();
};
template <BatchRange L>
using batch_of = std::remove_cvref_t<decltype(*std::declval<L&>().begin())>;

template <class L>
concept LoaderSized = requires(const L& loader) {
  { loader.size() } -> std::convertible_to<std::size_t>;
};
template <class L>
concept LoaderEpochs = requires(L& loader, int epoch) { loader.set_epoch(epoch); };

// What evaluate needs: the batches alone (any range of them, a std::vector of batches too).
template <class L, class TaskType>
concept BatchesFor = BatchRange<L> && BatchFor<batch_of<L>, TaskType>;

template <class L, class TaskType>
concept Loader = LoaderEpochs<L> && LoaderSized<L> && BatchesFor<L, TaskType>;

template <class L>
concept ResumesMidEpoch = requires(L& loader, std::int64_t first) { loader.set_first_batch(first); };

namespace detail {
template <class L, class TaskType>
constexpr bool batches_fit() {
  if constexpr (BatchRange<L>) return BatchFor<batch_of<L>, TaskType>;
  else return true;
}
}  // namespace detail

// Each broken rule of Loader (training: fit, train_epoch) or of BatchesFor (evaluate) as its own
// sentence, where the Trainer takes a loader.
template <class L, class TaskType, bool Training = true>
struct LoaderContract {
  static_assert(!Training || LoaderEpochs<L>,
                "Trainer: the loader needs `set_epoch(int epoch)`, called before each training epoch (a sampler's "
                "shuffle; it may do nothing); add it; see ptrain/train/loader.hpp");
  static_assert(!Training || LoaderSized<L>,
                "Trainer: the loader needs `std::size_t size() const`, the number of batches in an epoch on this "
                "rank (fit agrees the ranks' counts and draws the progress bar from it); add it; see "
                "ptrain/train/loader.hpp");
  static_assert(BatchRange<L>,
                "Trainer: the loader must be a range of batches (begin() and end(), as `for (const auto& batch : "
                "loader)` takes them); add them; see ptrain/train/loader.hpp");
  static_assert(detail::batches_fit<L, TaskType>(),
                "Trainer: the loader's batches need `inputs` (a Tensor) and targets the task takes: `targets` "
                "convertible to the task's target_type, or a task with `batch_targets(batch)`; see "
                "ptrain/train/loader.hpp");
  static constexpr bool satisfied = Training ? Loader<L, TaskType> : BatchesFor<L, TaskType>;
};

}  // namespace ptrain
