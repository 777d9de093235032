#pragma once
// DataParallel<Backend, Compression>: every rank holds the whole model and trains on its shard
// of the batch; gradients are averaged over the world before each optimizer step, in buckets
// whose reductions overlap the rest of backward (as PyTorch DDP and Horovod do).
//
//   MpiComm world(session);
//   Trainer<Net, DataParallel<MpiAllreduce, Fp16>> trainer(model, sgd, {}, {world});
//
// The model may be on any device: its named_parameters() are Var<T, D> (and a 16-bit model's
// named_float_parameters(), batch norm's, Var<float, D>: their gradients have buckets of their
// own, reduced in the same way). A model in host memory
// (Cpu, HostEmulated) reduces over a host communicator (MpiAllreduce, SelfAllreduce); a Cuda
// model over one that moves GPU memory (NcclAllreduce, parallel/nccl_allreduce.hpp).
//
// Ranks whose loaders give different numbers of batches agree on one count each epoch
// (agree_steps, DataParallelOptions::uneven_inputs). Over an MpiComm the ranks' collectives are
// compared at setup, and after every step with PTRAIN_DEBUG_COLLECTIVES=1 (check_collectives).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/host_values.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/parallel/backends.hpp"
#include "ptrain/parallel/checkpoint_part.hpp"
#include "ptrain/parallel/compression.hpp"
#include "ptrain/parallel/detail/gradient_buckets.hpp"
#include "ptrain/parallel/detail/same_model.hpp"
#include "ptrain/parallel/detail/uneven_inputs.hpp"

namespace ptrain {

struct DataParallelOptions {
  // Of gradients in the model's scalar type. Smaller than DDP's 25 MiB: the last bucket's reduction
  // is the one backward cannot hide, and with 4 MiB the CIFAR ResNet-18 at 2 ranks kept 0.989 of
  // two unsynchronised ranks' speed against 0.978 (medians, bench/data_parallel.cpp).
  std::size_t bucket_bytes = std::size_t{4} << 20;
  // Buffers (batch-norm running statistics) from rank 0 after every optimizer step, as PyTorch
  // DDP's broadcast_buffers. At setup they are broadcast whatever this says.
  bool broadcast_buffers = true;
  // What the ranks do when their loaders give different numbers of batches in an epoch
  // (detail/uneven_inputs.hpp): train the fewest, or end every rank.
  UnevenInputs uneven_inputs = UnevenInputs::shortest;
  // What gradients travel as, read by DataParallel<Backend, RuntimeCompression> (and Sharded's);
  // with a compression in the type it must be left at fp32.
  WireFormat compression = WireFormat::fp32;
};

namespace detail {
template <class V>
struct ParameterOf;
template <class T, class D>
struct ParameterOf<Var<T, D>> {
  using scalar = T;
  using device = D;
};
// What a model's named_parameters() hold: Var<T, D>.
template <class Model>
using parameter_of = ParameterOf<
    typename std::remove_cvref_t<decltype(std::declval<Model&>().named_parameters())>::value_type::second_type>;

template <class T, class D>
std::span<T> elements(Tensor<T, D>& t) {
  return {t.data(), static_cast<std::size_t>(t.numel())};
}
}  // namespace detail

// A model DataParallel can hold (nn::Module<T, D> or any type with these): named Var<T, D>
// parameters and named buffers (Tensor<T, D>*).
template <class Model>
concept DataParallelModel = requires(Model& m) {
  typename detail::parameter_of<Model>::scalar;
  m.named_buffers();
};

template <class BackendTag, class CompressionTag = Fp32>
class DataParallel {
  static_assert(Backend<BackendTag>,
                "DataParallel<Backend, Compression>: Backend must name a Communicator, such as MpiAllreduce "
                "(ptrain/parallel/mpi_allreduce.hpp) or SelfAllreduce; see docs/policies.md");
  static_assert(Compression<CompressionTag>,
                "DataParallel<Backend, Compression>: Compression must be Fp32, Fp16 or Bf16; see docs/policies.md");

 public:
  using Comm = typename BackendTag::communicator;
  using backend = BackendTag;
  using compression = CompressionTag;
  // The Trainer takes one policy that averages gradients over the ranks (not Sharded beside this).
  static constexpr bool averages_gradients = true;
  // Its points take any Module<T, D> (train/policy.hpp: RunsOnAnyModule).
  static constexpr bool runs_on_any_module = true;

  explicit DataParallel(Comm& comm, DataParallelOptions options = {}) : comm_(&comm), options_(options) {
    check(options.bucket_bytes > 0, "DataParallel: bucket_bytes must be positive");
    check(std::same_as<CompressionTag, RuntimeCompression> || options.compression == WireFormat::fp32,
          "DataParallel<Backend, ", CompressionTag::name, ">: DataParallelOptions::compression is read only by "
          "DataParallel<Backend, RuntimeCompression>; the type already says what gradients travel as");
  }

  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->size(); }
  Comm& communicator() { return *comm_; }
  const DataParallelOptions& options() const { return options_; }
  std::size_t bucket_count() const {
    return (sync_ ? sync_->bucket_count() : 0) + (float_sync_ ? float_sync_->bucket_count() : 0);
  }

  // Trainer point: with a pipeline in the same Trainer, average over the ranks that hold the same
  // stage (the grid's data-parallel group) instead of the whole world.
  template <class Grid>
    requires requires(const Grid& g) { { g.stage_of(0) } -> std::convertible_to<int>; }
  void join_pipeline_grid(const Grid& grid) {
    const int rank = comm_->rank();
    data_group_ = std::make_shared<Comm>(comm_->split(grid.stage_of(rank), rank));
    comm_ = data_group_.get();
  }

  // Trainer point: same model on every rank, rank 0's weights everywhere, hooks installed.
  template <DataParallelModel Model>
  void setup(Model& model) {
    setup(model, {});
  }
  // With a rank per parameter (named_parameters() order; Sharded<Zero2>), that rank alone gets the
  // parameter's averaged gradient: the buckets are reduce-scattered (detail/gradient_buckets.hpp).
  template <DataParallelModel Model>
  void setup(Model& model, const std::vector<int>& gradient_owners) {
    using D = typename detail::parameter_of<Model>::device;
    static_assert(!std::is_same_v<memory_of_t<D>, Cpu> || std::is_same_v<comm_memory_t<Comm>, Cpu>,
                  "DataParallel: the model is in host memory (Cpu or HostEmulated) but the backend's communicator "
                  "moves device memory (as NcclAllreduce's does): give DataParallel a host backend, MpiAllreduce or "
                  "SelfAllreduce, or build the model on that device");
    static_assert(std::is_same_v<memory_of_t<D>, Cpu> || std::is_same_v<comm_memory_t<Comm>, D>,
                  "DataParallel: a model on a GPU (Var<T, Cuda>) needs a communicator that moves GPU memory: use "
                  "DataParallel<NcclAllreduce, ...> (ptrain/parallel/nccl_allreduce.hpp, nvcc), not MpiAllreduce "
                  "or SelfAllreduce");
    auto float_params = float_parameters_of(model);
    std::vector<std::string> descriptions;
    for (const auto& [name, p] : model.named_parameters()) descriptions.push_back("parameter " + name + " " + p.shape().str());
    for (const auto& [name, p] : float_params) descriptions.push_back("float parameter " + name + " " + p.shape().str());
    for (const auto& [name, b] : model.named_buffers()) descriptions.push_back("buffer " + name + " " + b->shape().str());
    if constexpr (requires { model.named_float_buffers(); })
      for (const auto& [name, b] : model.named_float_buffers())
        descriptions.push_back("float buffer " + name + " " + b->shape().str());
    detail::check_same_model(*comm_, descriptions, "DataParallel");

    for (auto& [name, p] : model.named_parameters()) comm_->broadcast(detail::elements(p.value()), 0);
    for (auto& [name, p] : float_params) comm_->broadcast(detail::elements(p.value()), 0);
    broadcast_buffers(model);

    const std::size_t count = model.named_parameters().size();
    check(gradient_owners.empty() || gradient_owners.size() == count + float_params.size(), "DataParallel: ",
          gradient_owners.size(), " gradient owners for ", count + float_params.size(), " parameters");
    const auto owners_from = [&](std::size_t first) {
      return gradient_owners.empty() ? gradient_owners
                                     : std::vector<int>(gradient_owners.begin() + static_cast<std::ptrdiff_t>(first),
                                                        gradient_owners.end());
    };
    sync_ = gradient_buckets(model.named_parameters(), owners_from(0));
    float_sync_ = float_params.empty() ? nullptr : gradient_buckets(float_params, owners_from(count));
    check_collectives("setup");
  }

  // Trainer point: micro-steps of gradient accumulation that end in no optimizer step keep their
  // gradients local.
  template <DataParallelModel Model>
  void before_backward(Model&, bool ends_in_step) {
    check(sync_ != nullptr, "DataParallel: setup() was not called (the Trainer calls it)");
    sync_->set_sync(ends_in_step);
    if (float_sync_) float_sync_->set_sync(ends_in_step);
  }

  // Trainer point: every gradient averaged over the world.
  template <DataParallelModel Model>
  bool before_optimizer_step(Model&) {
    check(sync_ != nullptr, "DataParallel: setup() was not called (the Trainer calls it)");
    sync_->finish();
    if (float_sync_) float_sync_->finish();
    return true;
  }

  // Trainer point: each rank's batch moved its running statistics its own way; rank 0's replace
  // them, so every rank ends the step, and starts the next forward, with the same buffers (DDP
  // broadcasts before each forward instead, which leaves the ranks' evaluations apart).
  template <DataParallelModel Model>
  void after_optimizer_step(Model& model) {
    if (options_.broadcast_buffers) broadcast_buffers(model);
    ++steps_;
    if constexpr (requires { comm_->check_collectives_every_step(); })
      if (comm_->check_collectives_every_step()) check_collectives("step " + std::to_string(steps_));
  }

  // Trainer point: before each training epoch, the number of batches every rank trains, agreed
  // from each rank's own count so that no rank waits in an allreduce the others never start.
  std::int64_t agree_steps(std::int64_t local_steps) {
    return steps_agreement_.agree(
        local_steps, comm_->size(),
        [&](std::span<const double> mine, std::span<double> all) { host_allgather(*comm_, mine, all); }, is_main());
  }

  // Trainer point: an epoch's sums (loss, samples, the task's metric state) over every rank.
  void reduce(std::span<double> sums) { host_allreduce_sum(*comm_, sums); }

  bool is_main() const { return comm_->rank() == 0; }

  // Trainer point: every replica holds the same weights and optimizer state; the first saves them.
  CheckpointPart checkpoint_part() const { return {.replica = comm_->rank(), .replicas = comm_->size()}; }

 private:
  // Every rank started the same collectives since the last check (a communicator that logs them:
  // MpiComm); a rank that skipped or added one is named with its collective and another rank's.
  void check_collectives(const std::string& where) {
    if constexpr (requires { comm_->check_collectives(where); }) comm_->check_collectives("DataParallel " + where);
  }

  // A 16-bit model's float parameters (batch norm's weight and bias), named; none for others.
  template <class Model>
  static auto float_parameters_of(const Model& model) {
    if constexpr (requires { model.named_float_parameters(); }) return model.named_float_parameters();
    else return std::vector<std::pair<std::string, Var<float, typename detail::parameter_of<Model>::device>>>{};
  }

  // Hooks on the trainable ones of named parameters of one type; owners[i] (if any) the rank
  // keeping the i-th's averaged gradient.
  template <class U, class D>
  std::shared_ptr<detail::GradientSync> gradient_buckets(const std::vector<std::pair<std::string, Var<U, D>>>& params,
                                                         const std::vector<int>& owners) {
    std::vector<Var<U, D>> trainable;
    std::vector<int> trainable_owners;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].second.requires_grad()) {
        trainable.push_back(params[i].second);
        if (!owners.empty()) trainable_owners.push_back(owners[i]);
      }
    const auto buckets = [&]<class Wire>() -> std::shared_ptr<detail::GradientSync> {
      return std::make_shared<detail::GradientBuckets<U, Comm, Wire, D>>(*comm_, std::move(trainable),
                                                                          options_.bucket_bytes,
                                                                          std::move(trainable_owners));
    };
    if constexpr (std::same_as<CompressionTag, RuntimeCompression>) {
      if (options_.compression == WireFormat::fp16) return buckets.template operator()<half>();
      if (options_.compression == WireFormat::bf16) return buckets.template operator()<bfloat16>();
      return buckets.template operator()<U>();
    } else {
      return buckets.template operator()<typename CompressionTag::template wire<U>>();
    }
  }

  template <class Model>
  void broadcast_buffers(Model& model) {
    for (auto& [name, b] : model.named_buffers()) comm_->broadcast(detail::elements(*b), 0);
    if constexpr (requires { model.named_float_buffers(); })
      for (auto& [name, b] : model.named_float_buffers()) comm_->broadcast(detail::elements(*b), 0);
  }

  Comm* comm_;
  std::shared_ptr<Comm> data_group_;  // owned when split from the world by a pipeline grid
  DataParallelOptions options_;
  std::shared_ptr<detail::GradientSync> sync_;
  std::shared_ptr<detail::GradientSync> float_sync_;  // a 16-bit model's float parameters
  detail::StepAgreement steps_agreement_{"DataParallel", options_.uneven_inputs};
  std::int64_t steps_ = 0;
};

}  // namespace ptrain
