// The TrainerPolicy contract (train/policy.hpp, docs/policies.md): an archetype that implements
// every point with its documented signature compiles against it and is called at every point by
// the Trainer; the library's policies satisfy it; a name is detected whatever its form (template,
// overload set, inherited), and a misspelt or mistyped point is told apart from a correct one.
// test/compile_fail holds the sentences the Trainer fails with.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <ptrain/core/half.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/backends.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/parallel/sharded.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/policy.hpp>
#include <ptrain/train/trainer.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(policy_contract_test)

namespace {

using Net = Sequential<float>;

// Every point, each with the signature docs/policies.md gives, each recording that it ran.
struct ArchetypePolicy {
  std::vector<std::string>* calls;
  // A role, declared: its ranks run different parts of the model (as a Pipeline's stages), so the
  // ranks agree on each step through reduce.
  static constexpr bool splits_model = true;

  PipelineGrid pipeline_grid() {
    calls->push_back("pipeline_grid");
    return {};
  }
  void join_pipeline_grid(const PipelineGrid& grid) {
    BOOST_TEST(grid.stages == 1);
    calls->push_back("join_pipeline_grid");
  }
  Module<float>& partition(Net& model, bool data_parallel) {
    BOOST_TEST(data_parallel);  // this policy joined the grid itself
    calls->push_back("partition");
    return model;
  }
  void setup(Module<float>&) { calls->push_back("setup"); }
  void before_backward(Module<float>&, bool ends_in_step) {
    calls->push_back(ends_in_step ? "before_backward(ends_in_step)" : "before_backward");
  }
  double loss_scale() {
    calls->push_back("loss_scale");
    return 1.0;
  }
  template <class BeforeBackward>
  EpochTotals forward_backward(Module<float>& model, const Tensor<float>& inputs,
                               const std::vector<std::int64_t>& targets, const Classification& task, double loss_scale,
                               const BeforeBackward& before_backward, BatchUpload<Cpu>& upload) {
    calls->push_back("forward_backward");
    const Var<float> loss = task.loss(model.forward(Var<float>(upload(inputs))), targets, loss_scale);
    before_backward(true);
    backward(loss);
    const auto n = static_cast<double>(targets.size());
    return {0.5 * n, n, n, std::vector<double>{1, n}};  // one correct of n (top-1), n samples
  }
  EpochTotals evaluate_batch(Module<float>&, const Tensor<float>&, const std::vector<std::int64_t>& targets,
                             const Classification&, BatchUpload<Cpu>&) {
    calls->push_back("evaluate_batch");
    const auto n = static_cast<double>(targets.size());
    return {0.25 * n, n, n, std::vector<double>{n, n}};  // every one correct
  }
  void optimizer_parameters(const std::vector<Var<float>>& params) {
    BOOST_TEST(params.size() == 2u);  // the Linear's weight and bias, as the optimizer holds them
    calls->push_back("optimizer_parameters");
  }
  bool before_optimizer_step(Module<float>&) {
    calls->push_back("before_optimizer_step");
    return true;
  }
  void step_decided(bool stepped) { calls->push_back(stepped ? "step_decided(stepped)" : "step_decided"); }
  void after_optimizer_step(Module<float>&) { calls->push_back("after_optimizer_step"); }
  void reduce(std::span<double>) { calls->push_back("reduce"); }
  bool is_main() {
    calls->push_back("is_main");
    return true;
  }
};
static_assert(TrainerPolicy<ArchetypePolicy, Net>);

// The library's policies, on the models they serve.
static_assert(TrainerPolicy<DataParallel<SelfAllreduce>, Net>);
static_assert(TrainerPolicy<DataParallel<SelfAllreduce, Fp16>, Sequential<float, HostEmulated>>);
static_assert(TrainerPolicy<DataParallel<SelfAllreduce>, Sequential<double>>);
static_assert(TrainerPolicy<Sharded<Zero1, SelfAllreduce>, Net>);
static_assert(TrainerPolicy<Sharded<Zero1, SelfAllreduce, Bf16>, Sequential<ptrain::bfloat16>>);
static_assert(OptimizerParametersPoint<Sharded<Zero1, SelfAllreduce>, std::vector<Var<float>>>);
static_assert(AveragesGradients<Sharded<Zero1, SelfAllreduce>> && AveragesGradients<DataParallel<SelfAllreduce>>);
static_assert(TrainerPolicy<Sharded<Zero3, SelfAllreduce>, Net>);
static_assert(ParameterPoints<Sharded<Zero3, SelfAllreduce>> && ShardsGradients<Sharded<Zero3, SelfAllreduce>>);
static_assert(ShardsGradients<Sharded<Zero1, SelfAllreduce>>);  // each rank the gradients of its own masters
// The stage chosen when the program runs: the same points; it may reduce-scatter (reduces_scatter() says).
static_assert(TrainerPolicy<Sharded<RuntimeStage, SelfAllreduce>, Net> && ParameterPoints<Sharded<RuntimeStage, SelfAllreduce>>);
static_assert(ReduceScattersGradients<Sharded<RuntimeStage, SelfAllreduce>> && !ReduceScattersGradients<Sharded<Zero1, SelfAllreduce>>);
static_assert(!AveragesGradients<Pipeline<4>> && !AveragesGradients<MixedPrecision<Bf16>>);
static_assert(TrainerPolicy<Pipeline<4>, Net>);
static_assert(TrainerPolicy<Pipeline<2, OneFOneB>, Sequential<float, HostEmulated>>);
static_assert(TrainerPolicy<MixedPrecision<Bf16>, Sequential<ptrain::bfloat16>>);
static_assert(TrainerPolicy<MixedPrecision<Fp16, HostEmulated>, Sequential<ptrain::half, HostEmulated>>);
// Roles are declared, not guessed from the points a policy has.
static_assert(SplitsModel<Pipeline<4>> && !SplitsModel<DataParallel<SelfAllreduce>> && !SplitsModel<Sharded<Zero1, SelfAllreduce>>);
static_assert(!SplitsModel<MixedPrecision<Bf16>> && !ShardsGradients<DataParallel<SelfAllreduce>>);
static_assert(SharedParametersPoint<Pipeline<4>> && NamesSharedParameters<Pipeline<4>>);
static_assert(MasterParametersPoints<MixedPrecision<Bf16>> && NamesMasterParameters<MixedPrecision<Bf16>>);
static_assert(OptimizerParametersWithSourcesPoint<Sharded<Zero1, SelfAllreduce>, std::vector<Var<float>>>);
static_assert(NamesHandRoundingToOptimizer<MixedPrecision<Bf16>> &&
              HandRoundingToOptimizerPoint<MixedPrecision<Bf16>, std::vector<Var<float>>, Cpu>);
static_assert(!NamesHandRoundingToOptimizer<Sharded<Zero1, SelfAllreduce>>);

// shared_parameters and master_parameters/master_sources are checked points: a misspelt or
// ill-typed one is refused, not silently ignored.
struct SharedCount {
  void setup(Module<float>&);
  int shared_parameters() const;
};
struct MastersWithoutSources {
  std::vector<Var<float>> master_parameters() const;
};
struct MastersOfWrongType {
  std::vector<int> master_parameters() const;
  std::vector<const void*> master_sources() const;
};
static_assert(NamesSharedParameters<SharedCount> && !SharedParametersPoint<SharedCount> && !TrainerPolicy<SharedCount, Net>);
static_assert(!TrainerPolicy<MastersWithoutSources, Net> && !TrainerPolicy<MastersOfWrongType, Net>);
// hand_rounding_to_optimizer is checked where the Trainer calls it, with the optimizer's parameters.
struct RoundsIntoInts {
  std::vector<int> hand_rounding_to_optimizer(const std::vector<Var<float>>&);
};
static_assert(NamesHandRoundingToOptimizer<RoundsIntoInts> && NamesSomePoint<RoundsIntoInts> &&
              !HandRoundingToOptimizerPoint<RoundsIntoInts, std::vector<Var<float>>, Cpu>);

// Names are seen in any form.
struct TemplatePoint {
  template <class M>
  void setup(M&);
};
struct OverloadedPoint {
  void reduce(std::span<double>);
  void reduce(std::span<double>, int);
};
struct InheritedPoint : OverloadedPoint {};
struct DataMemberPoint {
  bool is_main = true;
};
struct NoPoint {
  void set_up(Module<float>&);
  bool before_optimiser_step(Module<float>&);
};
struct FinalPolicy final {
  void setup(Module<float>&);
};
static_assert(NamesSetup<TemplatePoint> && !NamesReduce<TemplatePoint>);
static_assert(NamesReduce<OverloadedPoint> && NamesReduce<InheritedPoint>);
static_assert(NamesIsMain<DataMemberPoint> && !IsMainPoint<DataMemberPoint>);
static_assert(!NamesSomePoint<NoPoint> && !TrainerPolicy<NoPoint, Net>);
static_assert(!NamesSomePoint<FinalPolicy> && !NamesSomePoint<int>);
static_assert(TrainerPolicy<TemplatePoint, Net> && TrainerPolicy<InheritedPoint, Net>);

// Named, but not callable as the Trainer calls it: each fails TrainerPolicy.
struct SetupTakesTheWrongModel {
  void setup(Module<double>&);
};
struct BeforeOptimizerStepReturnsNothing {
  void before_optimizer_step(Module<float>&);
};
struct BeforeBackwardWithoutFlag {
  void before_backward(Module<float>&);
};
struct ReduceByValue {
  void reduce(std::vector<double>&&);
};
struct PartitionReturnsAnotherDevice {
  Module<float, HostEmulated>& partition(Net&, bool);
};
struct LossScaleNeedsAnArgument {
  double loss_scale(int);
};
struct StepDecidedWithoutFlag {
  void step_decided();
};
static_assert(NamesSetup<SetupTakesTheWrongModel> && !TrainerPolicy<SetupTakesTheWrongModel, Net>);
static_assert(TrainerPolicy<SetupTakesTheWrongModel, Sequential<double>>);
static_assert(!TrainerPolicy<BeforeOptimizerStepReturnsNothing, Net>);
static_assert(!TrainerPolicy<BeforeBackwardWithoutFlag, Net>);
static_assert(!TrainerPolicy<ReduceByValue, Net>);
static_assert(!TrainerPolicy<PartitionReturnsAnotherDevice, Net>);
static_assert(!TrainerPolicy<LossScaleNeedsAnArgument, Net>);
static_assert(NamesStepDecided<StepDecidedWithoutFlag> && !TrainerPolicy<StepDecidedWithoutFlag, Net>);

// The checkpoint points: a part is a CheckpointPart, and a policy's state is saved and loaded
// both or neither.
struct CheckpointPartAsInt {
  int checkpoint_part();
};
struct StateWithoutLoad {
  OptimizerState<float> checkpoint_state();
};
struct StateBothWays {
  OptimizerState<float> checkpoint_state();
  void load_checkpoint_state(const OptimizerState<float>&);
};
static_assert(!TrainerPolicy<CheckpointPartAsInt, Net> && !TrainerPolicy<StateWithoutLoad, Net>);
static_assert(TrainerPolicy<StateBothWays, Net> && CheckpointStatePoint<StateBothWays>);

struct Batch {
  Tensor<float> inputs;
  std::vector<std::int64_t> targets;
};
struct OneBatch {
  std::vector<Batch> batches;
  void set_epoch(int) {}
  std::size_t size() const { return batches.size(); }
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_archetype_is_called_at_every_point_in_order) {
  std::vector<std::string> calls;
  manual_seed(2);
  auto model = std::make_shared<Net>(std::initializer_list<std::shared_ptr<Module<float>>>{make<Linear<float>>(2, 2)});
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1});
  Trainer<Net, ArchetypePolicy> trainer(model, sgd, {.progress_bar = false, .print_epochs = false},
                                        ArchetypePolicy{&calls});
  // is_main once, at construction: the main rank's logs are made there.
  const std::vector<std::string> construction{"pipeline_grid", "join_pipeline_grid", "partition", "setup",
                                              "optimizer_parameters", "is_main"};
  BOOST_TEST(calls == construction, boost::test_tools::per_element());

  calls.clear();
  const auto before = model->parameters()[0].value().clone();
  Tensor<float> x({2, 2});
  x[0] = x[3] = 1;
  x[1] = x[2] = -1;
  OneBatch data{{{x, {0, 1}}}};
  const auto results = trainer.fit(data, &data, 1);
  BOOST_TEST(results[0].train_loss == 0.5);  // the archetype's forward_backward replaced the Trainer's
  BOOST_TEST(results[0].val.at("accuracy") == 1.0);  // and its evaluate_batch the Trainer's
  BOOST_TEST(!(model->parameters()[0].value().array() == before.array()).all());
  // A pipeline's stages agree on the step through reduce before step_decided.
  const std::vector<std::string> epoch{"loss_scale",
                                       "forward_backward",
                                       "before_backward(ends_in_step)",
                                       "before_optimizer_step",
                                       "reduce",
                                       "step_decided(stepped)",
                                       "after_optimizer_step",
                                       "reduce",
                                       "evaluate_batch",
                                       "reduce"};
  BOOST_TEST(calls == epoch, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
