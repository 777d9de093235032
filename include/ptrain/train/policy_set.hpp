#pragma once
// PolicySet<Model, Policies...>: the Trainer's policies (and the task among them), and the one
// place that walks them. The Trainer asks it at each point of a step; it calls every policy that
// implements the point (train/policy.hpp checks the signatures), in this order:
//
//   once, at construction (lay_out)
//     pipeline_grid, join_pipeline_grid   a policy that splits the model lays out the world; the
//                                         data-parallel policy then averages over one stage's ranks
//     partition, setup                    the part of the model this rank runs, then hooks on it
//     optimizer_parameters                the optimizer's params() (with the model parameter each
//                                         stands for, through master_parameters/master_sources)
//     hand_rounding_to_optimizer          to an optimizer that rounds as it steps (round_into):
//                                         the model parameters its masters round into
//   each batch
//     before_backward, loss_scale         (the product of the loss scales), forward_backward or
//                                         evaluate_batch where a policy replaces the plain pass
//   each optimizer step
//     before_optimizer_step               by role, whatever the policies' order: the policy that
//                                         averages gradients (AveragesGradients), then the ones that
//                                         split the model (SplitsModel: shared copies summed), then
//                                         the others (MixedPrecision unscales); false skips the step
//     steps_together                      one rank's skip is every rank's where the ranks hold
//                                         different gradients (SplitsModel, ShardsGradients)
//     step_decided, after_optimizer_step  the latter in reverse order, as a stack unwinds
//   sums over ranks: reduce on every policy (sum_over_ranks); over the ranks that hold different
//   parts of the model only (sum_over_model_parts: SplitsModel, ShardsGradients)
//   checkpoints: checkpoint_part merged, checkpoint_state concatenated, gather/shard of the
//   optimizer state and of the parameters
//
// Roles are what a policy declares (averages_gradients, shards_gradients, reduce_scatters,
// splits_model), never guessed from the points it has.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/timeline.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/parallel/checkpoint_part.hpp"
#include "ptrain/parallel/pipeline_grid.hpp"
#include "ptrain/tasks/classification.hpp"
#include "ptrain/tasks/epoch_totals.hpp"
#include "ptrain/tasks/task.hpp"
#include "ptrain/train/policy.hpp"

namespace ptrain {

namespace detail {
template <class... Policies>
struct TaskAmong {
  using type = Classification;
};
template <class First, class... Rest>
struct TaskAmong<First, Rest...> {
  using type = std::conditional_t<NamesTargets<First>, First, typename TaskAmong<Rest...>::type>;
};
// A task among the policies is no policy: it implements the task concept, not the points.
template <class P, class Model, class TaskType>
constexpr bool follows_policy_contract() {
  if constexpr (NamesTargets<P>) return true;
  else return PolicyContract<P, Model, TaskType>::satisfied;
}
}  // namespace detail

template <class Model, class... Policies>
class PolicySet {
 public:
  using T = typename Model::scalar_type;
  using D = typename Model::device_type;
  using Part = Module<T, D>;
  using TaskType = typename detail::TaskAmong<Policies...>::type;

  static_assert((0 + ... + int(NamesTargets<Policies>)) <= 1,
                "Trainer: more than one task (a type with a target_type) among the policies; give one");
  static_assert((detail::follows_policy_contract<Policies, Model, TaskType>() && ...),
                "Trainer<Model, Policies...>: a policy breaks the TrainerPolicy contract (the sentence above says "
                "which point and what to change); see docs/policies.md");
  static_assert((0 + ... + int(AveragesGradients<Policies>)) <= 1,
                "Trainer: DataParallel and Sharded (or two of either) both average the gradients over the ranks; "
                "give one: Sharded<Zero1> is DataParallel with the optimizer state split over the ranks; see "
                "docs/policies.md");

  // Whether a policy splits the optimizer's state over the ranks (its checkpoint is gathered).
  static constexpr bool shards_optimizer_state = (... || OptimizerStatePoints<Policies>);

  explicit PolicySet(Policies... policies) : policies_(std::move(policies)...) {}

  template <class P>
  P& get() {
    return std::get<P>(policies_);
  }
  TaskType task() const {
    if constexpr ((... || NamesTargets<Policies>)) return std::get<TaskType>(policies_);
    else return Classification{};
  }

  // ---- Once ----
  // The grid, the partition and the hooks: returns the part of the model this rank runs.
  Part& lay_out(Model& model) {
    bool data_parallel = false;
    for_each([&]<class P>(P& p) {
      if constexpr (PipelineGridPoint<P>) {
        const PipelineGrid grid = p.pipeline_grid();
        for_each([&]<class Q>(Q& q) {
          if constexpr (JoinPipelineGridPoint<Q>) {
            q.join_pipeline_grid(grid);
            data_parallel = true;
          }
        });
      }
    });
    Part* local = &model;
    for_each([&]<class P>(P& p) {
      if constexpr (PartitionPoint<P, Model>) local = &p.partition(model, data_parallel);
    });
    for_each([&]<class P>(P& p) {
      if constexpr (SetupPoint<P, Model>) p.setup(*local);
    });
    bool reduce_scattered = false;
    for_each([&]<class P>(P& p) {
      if constexpr (ReduceScattersGradients<P>) reduce_scattered = reduce_scattered || detail::reduces_scatter(p);
    });
    if (reduce_scattered)
      for_each([&]<class P>(P& p) {
        if constexpr (SharedParametersPoint<P>)
          check(p.shared_parameters().empty(), "Trainer: the pipeline's stages share ", p.shared_parameters().size(),
                " parameter(s) (", p.shared_parameters().front().name,
                " first), whose copies' gradients are summed over the stages, but Sharded<Zero2> and <Zero3> keep "
                "each gradient on one replica of a stage only; use Sharded<Zero1> or DataParallel beside this pipeline");
      });
    return *local;
  }

  // The optimizer's parameters, to the policies that step only a part of them (Sharded), and the
  // rounding of mixed precision's masters to the optimizer that can do it as it steps.
  template <class Opt>
  void offer_optimizer_parameters(Opt& optimizer) {
    for_each([&]<class P>(P& p) {
      if constexpr (NamesOptimizerParameters<P>) {
        static_assert(requires { optimizer.params(); },
                      "Trainer: a policy (Sharded) steps only its part of the optimizer's parameters, and this "
                      "optimizer has no params() to tell them (Sgd, Adam and AdamW have)");
        static_assert(OptimizerParametersPoint<P, std::remove_cvref_t<decltype(optimizer.params())>>,
                      "Trainer policy: optimizer_parameters must be callable as `void optimizer_parameters(const "
                      "std::vector<Var<U, D>>& params)` (the optimizer's params(); U: its scalar type); see "
                      "docs/policies.md");
        if constexpr (OptimizerParametersWithSourcesPoint<P, std::remove_cvref_t<decltype(optimizer.params())>>)
          p.optimizer_parameters(optimizer.params(), parameter_sources(optimizer.params()));
        else
          p.optimizer_parameters(optimizer.params());
      }
    });
    // An optimizer that rounds as it steps takes over the rounding of a policy's masters; with any
    // other the policy keeps it.
    if constexpr (requires { optimizer.round_into(std::vector<RoundedParameter<D>>{}); })
      for_each([&]<class P>(P& p) {
        if constexpr (NamesHandRoundingToOptimizer<P>) {
          static_assert(HandRoundingToOptimizerPoint<P, std::remove_cvref_t<decltype(optimizer.params())>, D>,
                        "Trainer policy: hand_rounding_to_optimizer must be callable as "
                        "`std::vector<RoundedParameter<D>> hand_rounding_to_optimizer(const std::vector<Var<U, D>>& "
                        "params)` (the optimizer's params()); see docs/policies.md");
          optimizer.round_into(p.hand_rounding_to_optimizer(optimizer.params()));
        }
      });
  }

  // ---- Each batch ----
  void before_backward(Part& local, bool ends_in_step) {
    for_each([&]<class P>(P& p) {
      if constexpr (BeforeBackwardPoint<P, Model>) p.before_backward(local, ends_in_step);
    });
  }
  // The product of the policies' loss scales (mixed precision's), 1 without any.
  double loss_scale() {
    double product = 1.0;
    for_each([&]<class P>(P& p) {
      if constexpr (LossScalePoint<P>) product *= p.loss_scale();
    });
    return product;
  }
  // A policy's forward, loss and backward (a pipeline's), or none where the plain pass runs.
  template <class Inputs, class Targets, class BeforeBackward, class Upload>
  std::optional<EpochTotals> forward_backward(Part& local, const Inputs& inputs, const Targets& targets,
                                              const TaskType& task, double loss_scale,
                                              const BeforeBackward& before_backward, Upload& upload) {
    std::optional<EpochTotals> replaced;
    for_each([&]<class P>(P& p) {
      if constexpr (ForwardBackwardPoint<P, Model, TaskType>)
        replaced = p.forward_backward(local, inputs, targets, task, loss_scale, before_backward, upload);
    });
    return replaced;
  }
  template <class Inputs, class Targets, class Upload>
  std::optional<EpochTotals> evaluate_batch(Part& local, const Inputs& inputs, const Targets& targets,
                                            const TaskType& task, Upload& upload) {
    std::optional<EpochTotals> replaced;
    for_each([&]<class P>(P& p) {
      if constexpr (EvaluateBatchPoint<P, Model, TaskType>) replaced = p.evaluate_batch(local, inputs, targets, task, upload);
    });
    return replaced;
  }

  // ---- Each optimizer step ----
  // Gradients complete in this order whatever the policies' order: averaged over the replicas,
  // then summed over the parts that share a parameter, then (MixedPrecision) unscaled.
  // timeline: where the wait for the gradients is drawn (none: not drawn).
  bool before_optimizer_step(Part& local, Timeline* timeline) {
    const TimelineSpan span(timeline, SpanKind::gradient_wait);
    bool proceed = true;
    const auto pass = [&]<bool Averages, bool Splits>() {
      for_each([&]<class P>(P& p) {
        if constexpr (BeforeOptimizerStepPoint<P, Model> && AveragesGradients<P> == Averages &&
                      (Averages || SplitsModel<P> == Splits))
          proceed = p.before_optimizer_step(local) && proceed;
      });
    };
    pass.template operator()<true, false>();
    pass.template operator()<false, true>();
    pass.template operator()<false, false>();
    return proceed;
  }
  // Whether this step runs: the rank's own verdict, unless the ranks hold different gradients (a
  // model split into parts, sharded gradients), when one rank's skip (an fp16 overflow) is every rank's.
  bool steps_together(bool local) {
    if constexpr (!(... || SplitsModel<Policies>) && !(... || ShardsGradients<Policies>)) {
      return local;
    } else {
      double vetoes = local ? 0.0 : 1.0;
      sum_over_ranks(std::span<double>(&vetoes, 1));
      return vetoes == 0;
    }
  }
  void step_decided(bool stepped) {
    for_each([&]<class P>(P& p) {
      if constexpr (StepDecidedPoint<P>) p.step_decided(stepped);
    });
  }
  void after_optimizer_step(Part& local) {
    for_each_in_reverse([&]<class P>(P& p) {
      if constexpr (AfterOptimizerStepPoint<P, Model>) p.after_optimizer_step(local);
    });
  }
  // Of the optimizer's parameters, those this rank adds to a global gradient norm.
  template <class Params>
  Params gradient_norm_parameters(const Params& params) {
    Params counted = params;
    for_each([&]<class P>(P& p) {
      if constexpr (NamesGradientNormParameters<P>) {
        static_assert(GradientNormParametersPoint<P, Params>,
                      "Trainer policy: gradient_norm_parameters must be callable as `std::vector<Var<U, D>> "
                      "gradient_norm_parameters(const std::vector<Var<U, D>>& params)` (the optimizer's params(); "
                      "U: its scalar type); see docs/policies.md");
        counted = p.gradient_norm_parameters(counted);
      }
    });
    return counted;
  }
  // Before each training epoch: how many batches every rank trains (DataParallel: the ranks'
  // loaders may differ).
  std::int64_t agree_steps(std::int64_t local_steps) {
    std::int64_t steps = local_steps;
    for_each([&]<class P>(P& p) {
      if constexpr (AgreeStepsPoint<P>) steps = p.agree_steps(steps);
    });
    return steps;
  }

  // ---- Over ranks ----
  // Sums over the ranks the policies span (data-parallel replicas, pipeline stages).
  void sum_over_ranks(std::span<double> sums) {
    for_each([&]<class P>(P& p) {
      if constexpr (ReducePoint<P>) p.reduce(sums);
    });
  }
  // Sums over the ranks whose gradients are different parts of the model's when the optimizer
  // steps (a pipeline's stages, a Sharded policy's ranks); not over replicas, which hold the same
  // averaged gradients.
  void sum_over_model_parts(std::span<double> sums) {
    for_each([&]<class P>(P& p) {
      if constexpr ((SplitsModel<P> || ShardsGradients<P>) && ReducePoint<P>) p.reduce(sums);
    });
  }
  // Whether any rank says yes (every rank calls it).
  bool any_rank(bool yes) {
    double flag = yes ? 1 : 0;
    sum_over_ranks(std::span<double>(&flag, 1));
    return flag > 0;
  }
  // Whether this process prints and writes logs.
  bool is_main() {
    bool main = true;
    for_each([&]<class P>(P& p) {
      if constexpr (IsMainPoint<P>) main = main && p.is_main();
    });
    return main;
  }

  // ---- Checkpoints ----
  CheckpointPart checkpoint_part() {
    CheckpointPart part;
    for_each([&]<class P>(P& p) {
      if constexpr (CheckpointPartPoint<P>) {
        const CheckpointPart mine = p.checkpoint_part();
        if (mine.count > 1) part.index = mine.index, part.count = mine.count;
        if (mine.replicas > 1) part.replica = mine.replica, part.replicas = mine.replicas;
      }
    });
    return part;
  }
  // The policies' own saved state, one after the other; none when no policy has any.
  std::optional<OptimizerState<float>> checkpoint_state() {
    std::optional<OptimizerState<float>> state;
    for_each([&]<class P>(P& p) {
      if constexpr (CheckpointStatePoint<P>) {
        const OptimizerState<float> mine = p.checkpoint_state();
        if (!state) state.emplace();
        state->scalars.insert(state->scalars.end(), mine.scalars.begin(), mine.scalars.end());
        state->tensors.insert(state->tensors.end(), mine.tensors.begin(), mine.tensors.end());
      }
    });
    return state;
  }
  void load_checkpoint_state(const OptimizerState<float>& state) {
    for_each([&]<class P>(P& p) {
      if constexpr (CheckpointStatePoint<P>) p.load_checkpoint_state(state);
    });
  }
  // The optimizer's state made whole for saving, and split again on load (Sharded).
  template <class State>
  State gather_optimizer_state(State state) {
    for_each([&]<class P>(P& p) {
      if constexpr (OptimizerStatePoints<P>) state = p.gather_optimizer_state(std::move(state));
    });
    return state;
  }
  template <class State>
  State shard_optimizer_state(State state) {
    for_each([&]<class P>(P& p) {
      if constexpr (OptimizerStatePoints<P>) state = p.shard_optimizer_state(std::move(state));
    });
    return state;
  }
  // The model whole on every rank around a checkpoint's model, then split again (Sharded<Zero3>).
  void gather_parameters() {
    for_each([&]<class P>(P& p) {
      if constexpr (ParameterPoints<P>) p.gather_parameters();
    });
  }
  void shard_parameters() {
    for_each([&]<class P>(P& p) {
      if constexpr (ParameterPoints<P>) p.shard_parameters();
    });
  }

 private:
  // The policies, leaving out the task among them.
  template <class F>
  void for_each(F&& f) {
    std::apply([&](auto&... p) { (apply_unless_task(f, p), ...); }, policies_);
  }
  template <class F>
  void for_each_in_reverse(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (apply_unless_task(f, std::get<sizeof...(I) - 1 - I>(policies_)), ...);
    }(std::index_sequence_for<Policies...>{});
  }
  template <class F, class P>
  static void apply_unless_task(F& f, P& p) {
    if constexpr (!NamesTargets<P>) f(p);
  }

  // Of each of the optimizer's parameters, the node of the model parameter it stands for: itself,
  // or the one whose master it is (MixedPrecision).
  template <class Params>
  std::vector<const void*> parameter_sources(const Params& params) {
    std::vector<const void*> sources;
    for (const auto& p : params) sources.push_back(p.node().get());
    for_each([&]<class P>(P& p) {
      if constexpr (MasterParametersPoints<P>) {
        std::map<const void*, const void*> source_of;
        const std::vector<const void*> copied = p.master_sources();
        for (std::size_t i = 0; i < copied.size(); ++i) source_of[p.master_parameters()[i].node().get()] = copied[i];
        for (const void*& s : sources)
          if (const auto found = source_of.find(s); found != source_of.end()) s = found->second;
      }
    });
    return sources;
  }

  std::tuple<Policies...> policies_;
};

}  // namespace ptrain
