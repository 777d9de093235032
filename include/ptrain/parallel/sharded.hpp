#pragma once
// Sharded<Stage, Backend, Compression>: data parallelism whose training state is split over the
// ranks, as ZeRO (DeepSpeed) and FairScale's OSS do.
//
//   MpiComm world(session);
//   Trainer<Net, Sharded<Zero1>> trainer(model, adam, {}, Sharded<Zero1>(world));
//   Trainer<Net16, Sharded<Zero1>, MixedPrecision<Bf16>> amp_trainer(model16, adam_on_masters, {}, sharded, amp);
//
// Zero1 (optimizer state sharding): gradients are averaged over the world as DataParallel averages
// them (the same buckets, hooks and compression); then each rank steps only the parameters it owns
// (detail/optimizer_shards.hpp: whole parameters, balanced by size), so its optimizer makes state
// (momentum, Adam's moments) for those alone, and the stepped parameters are all-gathered in
// buckets. The optimizer is told nothing: the Trainer hands its parameters to the
// optimizer_parameters point, and this policy drops the gradients of the others' parameters once
// the step is decided (an optimizer skips a parameter without a gradient). With MixedPrecision
// after it, the optimizer's parameters are the fp32 masters, and they are sharded too (ZeRO counts
// them in the optimizer state): each rank keeps the masters of its own parameters only (the
// others' storage let go after setup) and MixedPrecision unscales, steps and rounds those alone;
// then the 16-bit parameters they were rounded to are all-gathered (the Trainer calls
// after_optimizer_step in reverse order, so MixedPrecision, listed after, rounds first). Per rank,
// for Ψ parameters and Adam: 2Ψ + 2Ψ (16-bit weights and gradients) + 12Ψ/N (masters, moments).
//
// Zero2 (gradients sharded too): the same, but each gradient bucket is reduce-scattered
// (detail/gradient_buckets.hpp), overlapped with backward through the same hooks; a rank keeps
// the averaged gradients of its own parameters only and lets the others go as soon as they are in
// their bucket (under gradient accumulation, after the step's last backward). Its ranks then see
// different gradients, so the Trainer makes one rank's skipped step (an fp16 overflow, a
// non-finite gradient) every rank's.
//
// Zero3 (parameters sharded too): Zero2, and each rank keeps only the parameters it owns; the
// others' storage is let go between uses. The model must be a Sequential (ResNet, TransformerLM):
// around each top-level child's forward its parameters are gathered (the next child's prefetched)
// and freed after, and gathered again just before its backward (detail/parameter_shards.hpp).
// After a step the owner has stepped its parameters and nobody gathers them. gather_parameters()
// makes the model whole on every rank (the Trainer calls it around a checkpoint's model; call it
// before reading the weights), shard_parameters() lets the others' parameters go again. With
// MixedPrecision after it, the 16-bit model is sharded and each rank's masters, as under Zero1,
// are its own parameters' (rounded into them after a step).
//
// The partition is computed from the model's parameters at setup (a 16-bit model's float ones
// last, as MixedPrecision's masters list them); the optimizer's must be the same list (the model's
// parameters(), or MixedPrecision's masters of them). Beside a Pipeline (Trainer<Net, Sharded<...>,
// Pipeline<M>>) it shards over the replicas of each stage, as DataParallel averages over them: the
// partition is of the stage's parameters, which the optimizer over the whole model's parameters()
// holds among the others (or, with MixedPrecision, the masters of the stage's parameters among
// the whole model's: the Trainer tells which model parameter each master copies).
// Sharded<RuntimeStage> takes the stage in its constructor (a flag: the examples' --shard), so one
// Trainer type serves all three where a program lets its user choose; the model must then be a
// ptrain::Module, as Zero3 needs, whatever the stage.
// A checkpoint holds the whole optimizer state (gathered to rank 0) under the same keys as one
// optimizer over every parameter, so that another world size, stage, DataParallel or one process
// loads it; each rank keeps its own part of what it loads. MixedPrecision's masters are made whole
// on every rank around a checkpoint (gather_parameters), so its "master.<index>" entries are all
// there, and let go again after (shard_parameters).
// DataParallel and Sharded in one Trainer is a compile error (both average the gradients).
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/nn/sequential.hpp"
#include "ptrain/parallel/data_parallel.hpp"
#include "ptrain/parallel/detail/optimizer_shards.hpp"
#include "ptrain/parallel/detail/parameter_shards.hpp"

namespace ptrain {

struct MpiAllreduce;  // ptrain/parallel/mpi_allreduce.hpp: include it to use the default backend

// Stage 1: optimizer state sharded. Stage 2 adds the gradients, stage 3 the parameters.
struct Zero1 {
  static constexpr int stage = 1;
};
struct Zero2 {
  static constexpr int stage = 2;
};
struct Zero3 {
  static constexpr int stage = 3;
};

// The stage chosen when the program runs: 1, 2 or 3, as Zero1, Zero2, Zero3.
struct RuntimeStage {
  int stage = 1;
};

template <class S>
concept ZeroStage =
    std::same_as<S, Zero1> || std::same_as<S, Zero2> || std::same_as<S, Zero3> || std::same_as<S, RuntimeStage>;

// The parameters in the order every policy takes: what it is (the stage), what it talks over (the
// backend), how its gradients travel (the compression); docs/policies.md.
template <class Stage, class BackendTag = MpiAllreduce, class CompressionTag = Fp32>
class Sharded {
  static_assert(ZeroStage<Stage>,
                "Sharded<Stage, ...>: Stage must be Zero1, Zero2, Zero3 or RuntimeStage; see docs/policies.md");
  static_assert(Backend<BackendTag>,
                "Sharded<Stage, Backend, Compression>: Backend must name a Communicator, such as MpiAllreduce or "
                "SelfAllreduce (the backend comes second, before the compression, as in DataParallel<Backend, "
                "Compression>); see docs/policies.md");
  static_assert(Compression<CompressionTag>,
                "Sharded<Stage, Backend, Compression>: Compression must be Fp32, Fp16 or Bf16; see docs/policies.md");

 public:
  using stage = Stage;
  using DataParallelPart = DataParallel<BackendTag, CompressionTag>;
  using Comm = typename DataParallelPart::Comm;
  // The Trainer takes one policy that averages gradients over the ranks.
  static constexpr bool averages_gradients = true;
  // Its ranks keep different gradients (each the optimizer's of its own parameters; Zero2 and Zero3
  // the model's too), so they may judge a step apart (MixedPrecision checks the gradients it
  // unscales, its own masters'): the Trainer makes them agree whether a step runs.
  static constexpr bool shards_gradients = true;
  // Gradients are reduce-scattered, each rank receiving its own parameters' (Zero2, Zero3; with
  // RuntimeStage they may be, and reduces_scatter() says whether they are).
  static constexpr bool reduce_scatters = !std::same_as<Stage, Zero1>;
  // Its points take any Module<T, D> (Zero3 finds the Sequential it needs by dynamic_cast).
  static constexpr bool runs_on_any_module = true;

  // options.bucket_bytes sizes both the gradient buckets and the parameter all-gather's.
  explicit Sharded(Comm& comm, DataParallelOptions options = {})
    requires(!std::same_as<Stage, RuntimeStage>)
      : data_parallel_(comm, options), stage_(Stage::stage) {}
  Sharded(Comm& comm, RuntimeStage stage, DataParallelOptions options = {})
    requires std::same_as<Stage, RuntimeStage>
      : data_parallel_(comm, options), stage_(stage.stage) {
    check(stage_ >= 1 && stage_ <= 3, "Sharded<RuntimeStage>: stage ", stage_, ": expected 1, 2 or 3");
  }

  // Whether each rank gets the averaged gradients of its own parameters only (stages 2 and 3).
  bool reduces_scatter() const { return stage_ >= 2; }
  // Whether each rank keeps its own parameters only, the others' gathered around their use (stage 3).
  bool shards_parameters() const { return stage_ == 3; }
  // Whether it may (Zero3, RuntimeStage): then the model must be a Module, and a Sequential where it
  // does (a program that builds another model otherwise asks this).
  static constexpr bool may_shard_parameters = std::same_as<Stage, Zero3> || std::same_as<Stage, RuntimeStage>;

  int rank() const { return data_parallel_.rank(); }
  int world_size() const { return data_parallel_.world_size(); }
  const DataParallelOptions& options() const { return data_parallel_.options(); }
  // The rank that steps the optimizer's parameter i (-1: not trainable); after optimizer_parameters.
  int owner(std::size_t i) const { return shards().owner(i); }
  // The buckets of the model's parameters' all-gather after a step.
  std::size_t gather_bucket_count() const {
    std::size_t count = 0;
    for (const auto& g : model_gathers_) count += g->gather_bucket_count();
    return count;
  }

  // Trainer points shared with DataParallel: the same model everywhere, gradients averaged.
  template <class Grid>
    requires requires(const Grid& g) { { g.stage_of(0) } -> std::convertible_to<int>; }
  void join_pipeline_grid(const Grid& grid) {
    data_parallel_.join_pipeline_grid(grid);
    in_pipeline_ = true;
  }
  template <DataParallelModel Model>
  void setup(Model& model) {
    sizes_.clear();
    nodes_.clear();
    std::vector<bool> trainable;
    const auto count = [&](const auto& params) {
      for (const auto& [name, p] : params) {
        sizes_.push_back(p.numel());
        nodes_.push_back(p.node().get());
        trainable.push_back(p.requires_grad());
      }
    };
    count(model.named_parameters());
    if constexpr (requires { model.named_float_parameters(); }) count(model.named_float_parameters());
    owners_ = detail::balanced_partition(sizes_, trainable, data_parallel_.world_size());
    if (reduces_scatter()) data_parallel_.setup(model, owners_);
    else data_parallel_.setup(model);
    gather_after_steps(model);
    if constexpr (may_shard_parameters)
      if (shards_parameters()) shard_parameters_of(model);
  }
  template <DataParallelModel Model>
  void before_backward(Model& model, bool ends_in_step) {
    data_parallel_.before_backward(model, ends_in_step);
  }
  template <DataParallelModel Model>
  bool before_optimizer_step(Model& model) {
    const bool ok = data_parallel_.before_optimizer_step(model);
    if (shards_parameters()) parameters().release_leftovers();
    return ok;
  }
  std::int64_t agree_steps(std::int64_t local_steps) { return data_parallel_.agree_steps(local_steps); }
  void reduce(std::span<double> sums) { data_parallel_.reduce(sums); }
  bool is_main() const { return data_parallel_.is_main(); }
  CheckpointPart checkpoint_part() const { return data_parallel_.checkpoint_part(); }

  // Trainer point, once after setup: the parameters the optimizer steps (the model's, or
  // MixedPrecision's masters), in the model's parameter order, and of each the node of the model
  // parameter it stands for (itself, or the one a master copies). Under a pipeline, the whole
  // model's parameters (or their masters), of which this stage's, found by those nodes, are
  // partitioned over the stage's replicas.
  template <class U, class D>
  void optimizer_parameters(const std::vector<Var<U, D>>& params) {
    std::vector<const void*> sources;
    for (const auto& p : params) sources.push_back(p.node().get());
    optimizer_parameters(params, sources);
  }
  template <class U, class D>
  void optimizer_parameters(const std::vector<Var<U, D>>& params, const std::vector<const void*>& sources) {
    check(sources.size() == params.size(), "Sharded: ", sources.size(), " sources for the optimizer's ",
          params.size(), " parameters");
    if (in_pipeline_) {
      optimizer_owners_ = stage_owners(sources);
    } else {
      bool same = params.size() == sizes_.size();
      for (std::size_t i = 0; same && i < params.size(); ++i) same = params[i].numel() == sizes_[i];
      check(same, "Sharded: the optimizer's ", params.size(),
            " parameters are not the model's (", sizes_.size(), ", setup() first): give the optimizer the model's "
            "parameters(), or MixedPrecision's master_parameters(), in their order");
      optimizer_owners_ = owners_;
    }
    // The model's parameters are gathered after a step (model_gathers_); the others, MixedPrecision's
    // masters, stay with their owners but for a checkpoint.
    std::vector<bool> in_model(params.size(), false);
    for (std::size_t i = 0; i < params.size(); ++i)
      in_model[i] = std::ranges::find(nodes_, static_cast<const void*>(params[i].node().get())) != nodes_.end();
    shards_ = std::make_shared<detail::ShardedParameters<U, Comm, D>>(data_parallel_.communicator(), params,
                                                                      optimizer_owners_,
                                                                      data_parallel_.options().bucket_bytes, in_model);
    // Every policy's setup has read the whole model (MixedPrecision's masters start from it).
    shards_->release_others();
    if (shards_parameters()) parameters().release_all();
  }

  // Trainer points (checkpoints), every rank: the whole model (Zero3) and MixedPrecision's whole
  // masters on every rank, and then each rank's own only again.
  void gather_parameters() {
    if (shards_parameters()) parameters().gather_all();
    shards().gather();
  }
  void shard_parameters() {
    if (shards_parameters()) parameters().release_all();
    shards().release_others();
  }

  // Trainer points (checkpoints): the whole optimizer state on rank 0, which writes it (every rank
  // calls this); and, of a whole state read back, this rank's part.
  template <class U>
  OptimizerState<U> gather_optimizer_state(OptimizerState<U> mine) {
    return detail::gather_state(data_parallel_.communicator(), std::move(mine));
  }
  template <class U>
  OptimizerState<U> shard_optimizer_state(OptimizerState<U> whole) {
    return detail::own_state(std::move(whole), optimizer_owners_, rank());
  }

  // Trainer point: every rank agreed the step runs; the optimizer is to step this rank's part only.
  void step_decided(bool stepped) {
    stepped_ = stepped;
    if (stepped) shards().drop_others_gradients();
  }

  // Trainer point: the parameters every other rank stepped reach this one (below Zero3; under
  // MixedPrecision, the 16-bit values its own masters were rounded to: the Trainer calls this point
  // in reverse order, so MixedPrecision after this policy rounds first); then the buffers, as
  // DataParallel broadcasts them.
  template <DataParallelModel Model>
  void after_optimizer_step(Model& model) {
    if (std::exchange(stepped_, false))
      for (const auto& g : model_gathers_) g->gather();
    data_parallel_.after_optimizer_step(model);
  }

 private:
  // The owner of each of the optimizer's parameters, told by the model parameter it stands for:
  // this stage's keep theirs, the other stages' have none here (they get no gradient on this rank).
  std::vector<int> stage_owners(const std::vector<const void*>& sources) const {
    std::vector<int> owners(sources.size(), -1);
    std::size_t found = 0;
    for (std::size_t i = 0; i < sources.size(); ++i)
      for (std::size_t j = 0; j < nodes_.size(); ++j)
        if (sources[i] == nodes_[j]) {
          owners[i] = owners_[j];
          ++found;
        }
    check(found == nodes_.size(), "Sharded: under a pipeline the optimizer must step the model's own parameters() "
          "or MixedPrecision's master_parameters() (the Trainer tells which model parameter each master copies), "
          "this stage's ", nodes_.size(), " among them (", found, " found)");
    return owners;
  }

  // The all-gathers of the model's (the stage's) parameters after a step: its T ones (Zero3: none,
  // each stays with its owner) and its float ones (a 16-bit model's batch norm weights).
  template <DataParallelModel Model>
  void gather_after_steps(Model& model) {
    model_gathers_.clear();
    std::size_t first = 0;
    gather_after_steps(model.named_parameters(), first, shards_parameters());
    if constexpr (requires { model.named_float_parameters(); })
      gather_after_steps(model.named_float_parameters(), first, false);
  }
  template <class Named>
  void gather_after_steps(const Named& named, std::size_t& first, bool stay_with_owners) {
    std::vector<typename Named::value_type::second_type> params;
    for (const auto& [name, p] : named) params.push_back(p);
    const auto begin = owners_.begin() + static_cast<std::ptrdiff_t>(first);
    std::vector<int> owners(begin, begin + static_cast<std::ptrdiff_t>(params.size()));
    first += params.size();
    if (!params.empty()) model_gathers_.push_back(make_gather(std::move(params), std::move(owners), stay_with_owners));
  }
  template <class V, class DV>
  std::shared_ptr<detail::OwnedParameters> make_gather(std::vector<Var<V, DV>> params, std::vector<int> owners,
                                                       bool stay_with_owners) {
    const std::vector<bool> stays(params.size(), stay_with_owners);
    return std::make_shared<detail::ShardedParameters<V, Comm, DV>>(
        data_parallel_.communicator(), std::move(params), std::move(owners), data_parallel_.options().bucket_bytes,
        stays);
  }

  template <DataParallelModel Model>
  void shard_parameters_of(Model& model) {
    using T = typename detail::parameter_of<Model>::scalar;
    using D = typename detail::parameter_of<Model>::device;
    static_assert(std::derived_from<Model, Module<T, D>>, "Sharded<Zero3>: the model must be a ptrain::Module");
    auto* sequential = dynamic_cast<Sequential<T, D>*>(&model);
    check(sequential != nullptr,
          "Sharded<Zero3>: the model is not a Sequential; Zero3 gathers and frees the parameters of a Sequential's "
          "top-level children around their forward and backward (ResNet and TransformerLM are Sequentials). Use "
          "Sharded<Zero2> for this model");
    std::vector<Var<T, D>> params;
    for (const auto& [name, p] : model.named_parameters()) params.push_back(p);
    const std::vector<int> owners(owners_.begin(), owners_.begin() + static_cast<std::ptrdiff_t>(params.size()));
    parameters_ = std::make_shared<detail::ParameterShards<T, Comm, D>>(data_parallel_.communicator(), *sequential,
                                                                        std::move(params), owners);
  }

  detail::ParameterSharding& parameters() const {
    check(parameters_ != nullptr, "Sharded<Zero3>: setup() was not called (the Trainer calls it)");
    return *parameters_;
  }

  detail::OwnedParameters& shards() const {
    check(shards_ != nullptr,
          "Sharded: optimizer_parameters() was not called (the Trainer calls it with its optimizer's params())");
    return *shards_;
  }

  DataParallelPart data_parallel_;
  std::vector<std::int64_t> sizes_;      // the model's (a pipeline stage's) parameters'
  std::vector<const void*> nodes_;       // and their nodes
  std::vector<int> owners_;              // their ranks (detail::balanced_partition)
  std::vector<int> optimizer_owners_;    // the ranks of the optimizer's parameters (-1: none here)
  int stage_;
  bool in_pipeline_ = false;
  std::shared_ptr<detail::OwnedParameters> shards_;                     // the optimizer's parameters
  std::vector<std::shared_ptr<detail::OwnedParameters>> model_gathers_;  // the model's, by scalar type
  std::shared_ptr<detail::ParameterSharding> parameters_;               // Zero3
  bool stepped_ = false;
};

}  // namespace ptrain
