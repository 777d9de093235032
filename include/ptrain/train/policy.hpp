#pragma once
// The TrainerPolicy contract in code: what docs/policies.md writes down once ("The TrainerPolicy
// contract"), checked where the Trainer is instantiated.
//
// A policy names only the points it needs. A point it names must be callable exactly as the
// Trainer calls it; otherwise a misspelt or slightly-off point would compile and silently never
// run. So per point there are two tests: Names<Point><P> (P declares a member of that name at
// all: function, template, overload set) and <Point>Point<P, Model> (it is callable with the
// documented signature for the Trainer's Model). PolicyContract<P, Model> turns a named point
// that is not callable, or a policy that names none, into a static_assert sentence.
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ptrain/nn/module.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/parallel/checkpoint_part.hpp"
#include "ptrain/parallel/pipeline_grid.hpp"
#include "ptrain/tensor/tensor.hpp"
#include "ptrain/tasks/classification.hpp"
#include "ptrain/tasks/epoch_totals.hpp"

namespace ptrain {

namespace detail::policy_probe {

// One member per point. In Probe<P>, looking a point's name up finds it here and, when P declares
// it (in whatever form), in P too: ambiguous, so &Probe<P>::name is ill-formed exactly then.
struct EveryPointName {
  int pipeline_grid, join_pipeline_grid, partition, setup, before_backward, loss_scale, forward_backward,
      evaluate_batch, optimizer_parameters, before_optimizer_step, step_decided, after_optimizer_step, reduce,
      is_main, agree_steps, checkpoint_part, checkpoint_state, load_checkpoint_state, gather_optimizer_state,
      shard_optimizer_state, gather_parameters, shard_parameters, gradient_norm_parameters, shared_parameters,
      master_parameters, master_sources, hand_rounding_to_optimizer;
};
template <class P>
struct Probe : P, EveryPointName {};

template <class P>
concept Probeable = std::is_class_v<P> && !std::is_final_v<P>;

}  // namespace detail::policy_probe

// The model part the points after partition() receive: Module<T, D> of the Trainer's model.
template <class Model>
using PolicyModule = Module<typename Model::scalar_type, typename Model::device_type>;

// A policy that averages gradients over the ranks (DataParallel, Sharded) says so; a Trainer takes
// one such.
template <class P>
concept AveragesGradients = requires { requires P::averages_gradients; };
// A policy after which the ranks hold different gradients (Sharded: each the gradients of its own
// masters, Zero2 and Zero3 their own shard of the model's) says so; the Trainer then makes one
// rank's skipped step every rank's, as it does for pipeline stages.
template <class P>
concept ShardsGradients = requires { requires P::shards_gradients; };
// A policy after which each rank holds the model's gradients of its own parameters only
// (Sharded<Zero2>, <Zero3>: reduce-scattered) says so.
template <class P>
concept ReduceScattersGradients = requires { requires P::reduce_scatters; };
namespace detail {
// Whether p reduce-scatters in this run: a policy that may (Sharded<RuntimeStage>, its stage chosen
// when the program runs) says so in reduces_scatter(); the others by their role alone.
template <class P>
bool reduces_scatter(const P& p) {
  if constexpr (requires { { p.reduces_scatter() } -> std::convertible_to<bool>; }) return p.reduces_scatter();
  else return ReduceScattersGradients<P>;
}
}  // namespace detail

// A policy whose ranks each run a different part of the model (Pipeline: its stages) says so: the
// gradients of parameters that several parts share are summed over the parts after the replicas
// averaged them, a global gradient norm is summed over the parts, and one part's skipped step is
// every part's.
template <class P>
concept SplitsModel = requires { requires P::splits_model; };

// A policy that works on any Module<T, D> and nothing of the model's own type (DataParallel,
// Sharded) says so: a Trainer whose policies all do runs Trainer<Module<T, D>, Policies...>'s loop,
// one for every model of a scalar type and device (train/trainer.hpp), as a Trainer without
// policies does; the prebuilt library holds some of them.
template <class P>
concept RunsOnAnyModule = requires { requires P::runs_on_any_module; };

// Whether P names each point at all.
template <class P>
concept NamesPipelineGrid =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::pipeline_grid; };
template <class P>
concept NamesJoinPipelineGrid =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::join_pipeline_grid; };
template <class P>
concept NamesPartition =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::partition; };
template <class P>
concept NamesSetup = detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::setup; };
template <class P>
concept NamesBeforeBackward =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::before_backward; };
template <class P>
concept NamesLossScale =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::loss_scale; };
template <class P>
concept NamesForwardBackward =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::forward_backward; };
template <class P>
concept NamesEvaluateBatch =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::evaluate_batch; };
template <class P>
concept NamesOptimizerParameters =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::optimizer_parameters; };
template <class P>
concept NamesBeforeOptimizerStep =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::before_optimizer_step; };
template <class P>
concept NamesStepDecided =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::step_decided; };
template <class P>
concept NamesAfterOptimizerStep =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::after_optimizer_step; };
template <class P>
concept NamesReduce = detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::reduce; };
template <class P>
concept NamesIsMain = detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::is_main; };

template <class P>
concept NamesAgreeSteps =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::agree_steps; };

template <class P>
concept NamesCheckpointPart =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::checkpoint_part; };
template <class P>
concept NamesCheckpointState =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::checkpoint_state; };
template <class P>
concept NamesLoadCheckpointState =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::load_checkpoint_state; };
template <class P>
concept NamesGatherOptimizerState =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::gather_optimizer_state; };
template <class P>
concept NamesShardOptimizerState =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::shard_optimizer_state; };
template <class P>
concept NamesGatherParameters =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::gather_parameters; };
template <class P>
concept NamesShardParameters =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::shard_parameters; };
template <class P>
concept NamesGradientNormParameters =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::gradient_norm_parameters; };
template <class P>
concept NamesSharedParameters =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::shared_parameters; };
template <class P>
concept NamesMasterParameters =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::master_parameters; };
template <class P>
concept NamesMasterSources =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::master_sources; };
template <class P>
concept NamesHandRoundingToOptimizer =
    detail::policy_probe::Probeable<P> && !requires { &detail::policy_probe::Probe<P>::hand_rounding_to_optimizer; };
template <class P>
concept NamesSomePoint = NamesPipelineGrid<P> || NamesJoinPipelineGrid<P> || NamesPartition<P> || NamesSetup<P> ||
                         NamesBeforeBackward<P> || NamesLossScale<P> || NamesForwardBackward<P> ||
                         NamesEvaluateBatch<P> || NamesOptimizerParameters<P> || NamesBeforeOptimizerStep<P> ||
                         NamesStepDecided<P> || NamesAfterOptimizerStep<P> || NamesReduce<P> || NamesIsMain<P> ||
                         NamesAgreeSteps<P> || NamesCheckpointPart<P> || NamesCheckpointState<P> ||
                         NamesLoadCheckpointState<P> || NamesGatherOptimizerState<P> || NamesShardOptimizerState<P> ||
                         NamesGatherParameters<P> || NamesShardParameters<P> || NamesGradientNormParameters<P> ||
                         NamesSharedParameters<P> || NamesMasterParameters<P> || NamesMasterSources<P> ||
                         NamesHandRoundingToOptimizer<P>;

// Whether P implements each point with the signature the Trainer calls it with, for its Model.
template <class P>
concept PipelineGridPoint = requires(P& p) {
  { p.pipeline_grid() } -> std::convertible_to<PipelineGrid>;
};
template <class P>
concept JoinPipelineGridPoint = requires(P& p, const PipelineGrid& grid) { p.join_pipeline_grid(grid); };
template <class P, class Model>
concept PartitionPoint = requires(P& p, Model& model, bool data_parallel) {
  { p.partition(model, data_parallel) } -> std::convertible_to<PolicyModule<Model>&>;
};
template <class P, class Model>
concept SetupPoint = requires(P& p, PolicyModule<Model>& model) { p.setup(model); };
template <class P, class Model>
concept BeforeBackwardPoint = requires(P& p, PolicyModule<Model>& model, bool ends_in_step) {
  p.before_backward(model, ends_in_step);
};
template <class P>
concept LossScalePoint = requires(P& p) {
  { p.loss_scale() } -> std::convertible_to<double>;
};
// Checked where the Trainer calls it, with its optimizer's parameters (a policy cannot be checked
// against an optimizer type it does not know).
template <class P, class Params>
concept OptimizerParametersPoint = requires(P& p, const Params& params) { p.optimizer_parameters(params); };
// The same point, also told the node of the model parameter each of params stands for (itself, or
// the one a policy's master_parameters copies): Sharded's.
template <class P, class Params>
concept OptimizerParametersWithSourcesPoint = requires(P& p, const Params& params, const std::vector<const void*>& sources) {
  p.optimizer_parameters(params, sources);
};
// Of each of the optimizer's parameters, the model parameter its step writes rounded (an optimizer
// that rounds as it steps takes the list: round_into); the policy then leaves their rounding to
// the optimizer (MixedPrecision's masters). Checked where the Trainer calls it, as optimizer_parameters.
template <class P, class Params, class D>
concept HandRoundingToOptimizerPoint = requires(P& p, const Params& params) {
  { p.hand_rounding_to_optimizer(params) } -> std::convertible_to<std::vector<RoundedParameter<D>>>;
};
// Of the optimizer's parameters, those whose gradients this rank adds to the global norm
// (clip_grad_norm), when some are held on several ranks that all sum it (a Pipeline's shared
// parameters); checked where the Trainer calls it, as optimizer_parameters.
template <class P, class Params>
concept GradientNormParametersPoint = requires(P& p, const Params& params) {
  { p.gradient_norm_parameters(params) } -> std::convertible_to<Params>;
};
template <class P, class Model>
concept BeforeOptimizerStepPoint = requires(P& p, PolicyModule<Model>& model) {
  { p.before_optimizer_step(model) } -> std::convertible_to<bool>;
};
template <class P>
concept StepDecidedPoint = requires(P& p, bool stepped) { p.step_decided(stepped); };
template <class P, class Model>
concept AfterOptimizerStepPoint = requires(P& p, PolicyModule<Model>& model) { p.after_optimizer_step(model); };
template <class P>
concept IsMainPoint = requires(P& p) {
  { p.is_main() } -> std::convertible_to<bool>;
};
template <class P>
concept AgreeStepsPoint = requires(P& p, std::int64_t local_steps) {
  { p.agree_steps(local_steps) } -> std::convertible_to<std::int64_t>;
};

// Checkpoints (train/checkpoint.hpp): the part of the model this rank saves, and a policy's own
// state (MixedPrecision's fp32 masters and loss scale), saved and restored together.
template <class P>
concept CheckpointPartPoint = requires(P& p) {
  { p.checkpoint_part() } -> std::convertible_to<CheckpointPart>;
};
template <class P>
concept CheckpointStatePoint = requires(P& p, const OptimizerState<float>& state) {
  { p.checkpoint_state() } -> std::convertible_to<OptimizerState<float>>;
  p.load_checkpoint_state(state);
};
// A policy that splits the optimizer's state over the ranks (Sharded): the whole state for a
// checkpoint (every rank calls it; the writing rank's result is saved), and this rank's part of a
// whole state read back. Shown for OptimizerState<float>; the Trainer passes its optimizer's.
template <class P>
concept OptimizerStatePoints = requires(P& p, OptimizerState<float> state) {
  { p.gather_optimizer_state(state) } -> std::convertible_to<OptimizerState<float>>;
  { p.shard_optimizer_state(state) } -> std::convertible_to<OptimizerState<float>>;
};
// A policy that splits the model's parameters over the ranks (Sharded<Zero3>): the whole model on
// every rank for a checkpoint's model, and each rank's part only again (every rank calls both).
template <class P>
concept ParameterPoints = requires(P& p) {
  p.gather_parameters();
  p.shard_parameters();
};

// The parameters whose copies several of a policy's model parts hold (a Pipeline's tied embeddings):
// a list whose entries have a name. Sharded<Zero2|Zero3> refuses to run beside any.
template <class P>
concept SharedParametersPoint = requires(P& p) {
  { p.shared_parameters().size() } -> std::convertible_to<std::size_t>;
  { p.shared_parameters().empty() } -> std::convertible_to<bool>;
  { p.shared_parameters().front().name } -> std::convertible_to<std::string>;
};
// A policy whose optimizer steps copies of the model's parameters (MixedPrecision's fp32 masters):
// the copies, and the node of the model parameter each copies, in the same order. The Trainer tells
// a Sharded policy which model parameter each of the optimizer's parameters stands for.
template <class P>
concept MasterParametersPoints = requires(P& p) {
  { p.master_parameters().size() } -> std::convertible_to<std::size_t>;
  { p.master_parameters()[0].node().get() } -> std::convertible_to<const void*>;
  { p.master_sources() } -> std::convertible_to<std::vector<const void*>>;
};

// ---- The points a task's loss and metrics flow through: forward_backward, evaluate_batch,
// reduce. Their expected signatures and the sentences stating them are all in this block. ----

// What forward_backward receives as before_backward: called with whether this backward ends the step.
struct BeforeBackwardCall {
  void operator()(bool last_backward_of_step) const;
};

template <class P, class Model, class TaskType>
concept ForwardBackwardPoint =
    requires(P& p, PolicyModule<Model>& model, const Tensor<typename Model::scalar_type>& inputs,
             const typename TaskType::target_type& targets, const TaskType& task, double loss_scale,
             const BeforeBackwardCall& before_backward, BatchUpload<typename Model::device_type>& upload) {
      { p.forward_backward(model, inputs, targets, task, loss_scale, before_backward, upload) } -> std::convertible_to<EpochTotals>;
    };
template <class P, class Model, class TaskType>
concept EvaluateBatchPoint =
    requires(P& p, PolicyModule<Model>& model, const Tensor<typename Model::scalar_type>& inputs,
             const typename TaskType::target_type& targets, const TaskType& task,
             BatchUpload<typename Model::device_type>& upload) {
      { p.evaluate_batch(model, inputs, targets, task, upload) } -> std::convertible_to<EpochTotals>;
    };
template <class P>
concept ReducePoint = requires(P& p, std::span<double> sums) { p.reduce(sums); };

template <class P, class Model, class TaskType>
concept ImplementsTaskPoints = (!NamesForwardBackward<P> || ForwardBackwardPoint<P, Model, TaskType>) &&
                               (!NamesEvaluateBatch<P> || EvaluateBatchPoint<P, Model, TaskType>) &&
                               (!NamesReduce<P> || ReducePoint<P>);

template <class P, class Model, class TaskType>
struct TaskPointsContract {
  static_assert(!NamesForwardBackward<P> || ForwardBackwardPoint<P, Model, TaskType>,
                "Trainer policy: forward_backward must be callable as `EpochTotals forward_backward(Module<T, D>& "
                "model, const Tensor<T>& inputs, const Task::target_type& targets, const Task& task, double "
                "loss_scale, const BeforeBackward& before_backward, BatchUpload<D>& upload)` (T, D: the model's "
                "scalar_type and device_type; Task: the Trainer's task; before_backward(bool) callable); fix its "
                "parameters or return type; see docs/policies.md");
  static_assert(!NamesEvaluateBatch<P> || EvaluateBatchPoint<P, Model, TaskType>,
                "Trainer policy: evaluate_batch must be callable as `EpochTotals evaluate_batch(Module<T, D>& model, "
                "const Tensor<T>& inputs, const Task::target_type& targets, const Task& task, BatchUpload<D>& "
                "upload)` (T, D: the model's scalar_type and device_type; Task: the Trainer's task); fix its "
                "parameters or return type; see docs/policies.md");
  static_assert(!NamesReduce<P> || ReducePoint<P>,
                "Trainer policy: reduce must be callable as `void reduce(std::span<double> sums)` (an epoch's "
                "flat sums: loss, weight, samples, the task's metric state); fix its parameters; see "
                "docs/policies.md");
};

// ---- end of the task's points ----

// Every point P names is implemented as documented, and P names at least one: a policy the
// Trainer<Model, ...> takes. Says nothing about why not; PolicyContract does.
template <class P, class Model, class TaskType = Classification>
concept TrainerPolicy =
    NamesSomePoint<P> && (!NamesPipelineGrid<P> || PipelineGridPoint<P>) &&
    (!NamesJoinPipelineGrid<P> || JoinPipelineGridPoint<P>) && (!NamesPartition<P> || PartitionPoint<P, Model>) &&
    (!NamesSetup<P> || SetupPoint<P, Model>) && (!NamesBeforeBackward<P> || BeforeBackwardPoint<P, Model>) &&
    (!NamesLossScale<P> || LossScalePoint<P>) &&
    (!NamesBeforeOptimizerStep<P> || BeforeOptimizerStepPoint<P, Model>) &&
    (!NamesStepDecided<P> || StepDecidedPoint<P>) &&
    (!NamesAfterOptimizerStep<P> || AfterOptimizerStepPoint<P, Model>) && (!NamesIsMain<P> || IsMainPoint<P>) &&
    (!NamesAgreeSteps<P> || AgreeStepsPoint<P>) && (!NamesCheckpointPart<P> || CheckpointPartPoint<P>) &&
    (NamesCheckpointState<P> == NamesLoadCheckpointState<P>) && (!NamesCheckpointState<P> || CheckpointStatePoint<P>) &&
    (NamesGatherOptimizerState<P> == NamesShardOptimizerState<P>) &&
    (!NamesGatherOptimizerState<P> || OptimizerStatePoints<P>) &&
    (NamesGatherParameters<P> == NamesShardParameters<P>) && (!NamesGatherParameters<P> || ParameterPoints<P>) &&
    (!NamesSharedParameters<P> || SharedParametersPoint<P>) &&
    (NamesMasterParameters<P> == NamesMasterSources<P>) && (!NamesMasterParameters<P> || MasterParametersPoints<P>) &&
    ImplementsTaskPoints<P, Model, TaskType>;

// The Trainer instantiates this per policy: each broken rule is its own sentence, and the
// compiler's "in instantiation of PolicyContract<P, Model>" names the policy.
template <class P, class Model, class TaskType = Classification>
struct PolicyContract : TaskPointsContract<P, Model, TaskType> {
  static_assert(detail::policy_probe::Probeable<P>,
                "Trainer policy: a policy must be a class type that is not final (the Trainer detects its points "
                "by deriving from it); see docs/policies.md");
  static_assert(NamesSomePoint<P>,
                "Trainer policy: this policy type implements none of the Trainer's points (pipeline_grid, "
                "join_pipeline_grid, partition, setup, before_backward, loss_scale, forward_backward, "
                "evaluate_batch, optimizer_parameters, before_optimizer_step, step_decided, after_optimizer_step, "
                "reduce, is_main, agree_steps, checkpoint_part, checkpoint_state, load_checkpoint_state, "
                "gather_optimizer_state, shard_optimizer_state, gather_parameters, shard_parameters, "
                "gradient_norm_parameters, shared_parameters, master_parameters, master_sources, "
                "hand_rounding_to_optimizer); implement at least "
                "one, spelt as listed; see docs/policies.md");
  static_assert(!NamesPipelineGrid<P> || PipelineGridPoint<P>,
                "Trainer policy: pipeline_grid must be callable as `PipelineGrid pipeline_grid()` "
                "(ptrain/parallel/pipeline_grid.hpp); fix its parameters or return type; see docs/policies.md");
  static_assert(!NamesJoinPipelineGrid<P> || JoinPipelineGridPoint<P>,
                "Trainer policy: join_pipeline_grid must be callable as `void join_pipeline_grid(const PipelineGrid& "
                "grid)`; fix its parameters; see docs/policies.md");
  static_assert(!NamesPartition<P> || PartitionPoint<P, Model>,
                "Trainer policy: partition must be callable as `Module<T, D>& partition(Model& model, bool "
                "data_parallel)` (Model: the Trainer's model type; T, D: its scalar_type and device_type); fix its "
                "parameters or return type; see docs/policies.md");
  static_assert(!NamesSetup<P> || SetupPoint<P, Model>,
                "Trainer policy: setup must be callable as `void setup(Module<T, D>& model)` (T, D: the model's "
                "scalar_type and device_type); fix its parameter; see docs/policies.md");
  static_assert(!NamesBeforeBackward<P> || BeforeBackwardPoint<P, Model>,
                "Trainer policy: before_backward must be callable as `void before_backward(Module<T, D>& model, bool "
                "ends_in_step)` (T, D: the model's scalar_type and device_type); fix its parameters; see "
                "docs/policies.md");
  static_assert(!NamesLossScale<P> || LossScalePoint<P>,
                "Trainer policy: loss_scale must be callable as `double loss_scale()`; fix its parameters or return "
                "type; see docs/policies.md");
  static_assert(!NamesBeforeOptimizerStep<P> || BeforeOptimizerStepPoint<P, Model>,
                "Trainer policy: before_optimizer_step must be callable as `bool before_optimizer_step(Module<T, D>& "
                "model)` (T, D: the model's scalar_type and device_type; false skips the step); fix its parameter or "
                "return type; see docs/policies.md");
  static_assert(!NamesStepDecided<P> || StepDecidedPoint<P>,
                "Trainer policy: step_decided must be callable as `void step_decided(bool stepped)` (whether every "
                "rank takes this optimizer step); fix its parameter; see docs/policies.md");
  static_assert(!NamesAfterOptimizerStep<P> || AfterOptimizerStepPoint<P, Model>,
                "Trainer policy: after_optimizer_step must be callable as `void after_optimizer_step(Module<T, D>& "
                "model)` (T, D: the model's scalar_type and device_type); fix its parameter; see docs/policies.md");
  static_assert(!NamesIsMain<P> || IsMainPoint<P>,
                "Trainer policy: is_main must be callable as `bool is_main()`; fix its parameters or return type; "
                "see docs/policies.md");
  static_assert(!NamesAgreeSteps<P> || AgreeStepsPoint<P>,
                "Trainer policy: agree_steps must be callable as `std::int64_t agree_steps(std::int64_t "
                "local_steps)` (this rank's batches in the epoch; returns how many every rank trains); fix its "
                "parameters or return type; see docs/policies.md");
  static_assert(!NamesCheckpointPart<P> || CheckpointPartPoint<P>,
                "Trainer policy: checkpoint_part must be callable as `CheckpointPart checkpoint_part()` "
                "(ptrain/parallel/checkpoint_part.hpp); fix its parameters or return type; see docs/policies.md");
  static_assert(NamesCheckpointState<P> == NamesLoadCheckpointState<P>,
                "Trainer policy: checkpoint_state and load_checkpoint_state come together (what one saves the other "
                "restores); implement both or neither; see docs/policies.md");
  static_assert(!NamesCheckpointState<P> || CheckpointStatePoint<P>,
                "Trainer policy: the checkpoint state points must be callable as `OptimizerState<float> "
                "checkpoint_state()` and `void load_checkpoint_state(const OptimizerState<float>& state)`; fix their "
                "parameters or return types; see docs/policies.md");
  static_assert(NamesGatherOptimizerState<P> == NamesShardOptimizerState<P>,
                "Trainer policy: gather_optimizer_state and shard_optimizer_state come together (what one saves "
                "whole the other splits again on load); implement both or neither; see docs/policies.md");
  static_assert(!NamesGatherOptimizerState<P> || OptimizerStatePoints<P>,
                "Trainer policy: the optimizer state points must be callable as `OptimizerState<U> "
                "gather_optimizer_state(OptimizerState<U> mine)` and `OptimizerState<U> "
                "shard_optimizer_state(OptimizerState<U> whole)` (U: the optimizer's scalar type); fix their "
                "parameters or return types; see docs/policies.md");
  static_assert(NamesGatherParameters<P> == NamesShardParameters<P>,
                "Trainer policy: gather_parameters and shard_parameters come together (what one makes whole the "
                "other splits again); implement both or neither; see docs/policies.md");
  static_assert(!NamesGatherParameters<P> || ParameterPoints<P>,
                "Trainer policy: the parameter points must be callable as `void gather_parameters()` and `void "
                "shard_parameters()`; fix their parameters; see docs/policies.md");
  static_assert(!NamesSharedParameters<P> || SharedParametersPoint<P>,
                "Trainer policy: shared_parameters must be callable as `std::vector<Shared> shared_parameters()`, "
                "each entry with a `name` convertible to std::string (the parameters whose copies several model "
                "parts hold; an empty list when none); fix its return type; see docs/policies.md");
  static_assert(NamesMasterParameters<P> == NamesMasterSources<P>,
                "Trainer policy: master_parameters and master_sources come together (the copies the optimizer steps "
                "and the model parameter each copies); implement both or neither; see docs/policies.md");
  static_assert(!NamesMasterParameters<P> || MasterParametersPoints<P>,
                "Trainer policy: the master points must be callable as `const std::vector<Var<U, D>>& "
                "master_parameters()` and `std::vector<const void*> master_sources()` (the node of the model "
                "parameter each master copies, in the same order); fix their return types; see docs/policies.md");
  static constexpr bool satisfied = TrainerPolicy<P, Model, TaskType>;
};

}  // namespace ptrain
