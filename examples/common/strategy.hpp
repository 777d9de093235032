#pragma once
// The parallel strategy of an example, chosen by flags among compiled-in instantiations:
//   one process                      no policy
//   mpiexec -n N                     DataParallel<MpiAllreduce, RuntimeCompression> with the
//                                    --compression flag's format (NcclAllreduce on the GPUs of a
//                                    CUDA build)
//   --stages S                       Pipeline<4, RuntimeSchedule> (--schedule) over S ranks, --chunks micro-batches
//                                    per batch (default 4); with N > S ranks also
//                                    DataParallel over the N/S replicas of each stage (only in
//                                    examples that compile the pipelines in: with_pipelines)
//   mpiexec -n N --shard 1|2|3       Sharded<RuntimeStage, Backend, RuntimeCompression> (ZeRO stage 1, 2 or 3) instead of DataParallel
//                                    (examples that compile sharding in: Sharding::with; over NCCL
//                                    in a CUDA build; on one rank too), also over the replicas of
//                                    each --stages stage
// train(shard, policies...) is called with the matching policies, and what it returns is returned;
// shard says which part of each global batch this rank loads (its data-parallel replica). The wire
// format and the pipeline schedule are run-time options, so each strategy is instantiated once, not
// once per format and schedule.
#include <string>

#include <ptrain/mpi.hpp>

#include "cli.hpp"

namespace examples {

struct DataShard {
  int index = 0, count = 1;
};

enum class Pipelines { without, with };
enum class Sharding { without, with };

inline void add_strategy_options(Cli& cli, Pipelines pipelines = Pipelines::without,
                                 Sharding sharding = Sharding::without) {
  cli.choice_option("--compression", "fp32", {"fp32", "fp16", "bf16"}, "gradients on the wire when data-parallel");
  if (pipelines == Pipelines::with)
    cli.integer_option("--stages", 0, "pipeline stages (0: no pipeline); the world must be a multiple of it", 0)
        .choice_option("--schedule", "1f1b", {"gpipe", "1f1b"}, "pipeline schedule")
        .integer_option("--chunks", 4, "micro-batches per batch in a pipeline", 1, 1024)
        .integer_option("--checkpoint", 0, "1: recompute each pipeline stage's activations in backward", 0, 1);
  if (sharding == Sharding::with)
    cli.integer_option("--shard", 0,
                       "ZeRO stage when data-parallel: 1 shards the optimizer state over the ranks (Sharded<Zero1>), "
                       "2 the gradients too (Sharded<Zero2>), 3 the parameters too (Sharded<Zero3>); 0: DataParallel",
                       0, 3);
}

// The --compression flag's format, for DataParallelOptions::compression.
inline ptrain::DataParallelOptions data_parallel_options(const Cli& cli) {
  const std::string wire = cli.str("--compression");
  if (wire == "fp16") return {.compression = ptrain::WireFormat::fp16};
  if (wire == "bf16") return {.compression = ptrain::WireFormat::bf16};
  ptrain::check(wire == "fp32", "--compression '", wire, "': expected fp32, fp16 or bf16");
  return {};
}

// Sharded<RuntimeStage, Backend> at ZeRO stage --shard over comm (an MpiComm, or an NcclComm in the
// CUDA builds) with --compression, then the others (a pipeline). Returns what train returns.
template <class Backend = ptrain::MpiAllreduce, class Comm, class Train>
auto with_sharded(const Cli& cli, Comm& comm, DataShard shard, Train&& train, auto... others) {
  using Policy = ptrain::Sharded<ptrain::RuntimeStage, Backend, ptrain::RuntimeCompression>;
  const ptrain::RuntimeStage stage{static_cast<int>(cli.integer("--shard"))};
  return train(shard, Policy(comm, stage, data_parallel_options(cli)), others...);
}

// DataParallel<Backend> over comm (MpiAllreduce over the world, or NcclAllreduce over an NcclComm
// in the examples' CUDA builds) with --compression. Returns what train returns.
template <class Backend = ptrain::MpiAllreduce, class Comm, class Train>
auto with_data_parallel(const Cli& cli, Comm& comm, DataShard shard, Train&& train, auto... others) {
  using Policy = ptrain::DataParallel<Backend, ptrain::RuntimeCompression>;
  return train(shard, Policy(comm, data_parallel_options(cli)), others...);
}

// Over world: an MpiComm (a model in host memory), or in the CUDA builds an NcclComm with
// Backend = NcclAllreduce (a model on the GPUs; pipeline messages go over NCCL too).
template <Pipelines pipelines = Pipelines::without, class Backend = ptrain::MpiAllreduce,
          Sharding sharding = Sharding::without, class Comm, class Train>
auto with_strategy(const Cli& cli, Comm& world, Train&& train) {
  const bool sharded = sharding == Sharding::with && cli.integer("--shard") != 0;
  if constexpr (pipelines == Pipelines::with) {
    if (const int stages = static_cast<int>(cli.integer("--stages")); stages != 0) {
      const std::string schedule = cli.str("--schedule");
      ptrain::check(schedule == "gpipe" || schedule == "1f1b", "--schedule '", schedule, "': expected gpipe or 1f1b");
      ptrain::Pipeline<4, ptrain::RuntimeSchedule> pipeline(
          world, {.stages = stages,
                  .checkpoint = cli.integer("--checkpoint") != 0,
                  .micro_batches = static_cast<int>(cli.integer("--chunks")),
                  .schedule = schedule == "gpipe" ? ptrain::ScheduleKind::gpipe : ptrain::ScheduleKind::one_f_one_b});
      const DataShard shard{pipeline.replica(), pipeline.replicas()};
      ptrain::check(!sharded || pipeline.replicas() > 1, "--shard with --stages ", stages, " on ", world.size(),
                    " ranks: each stage has one replica, and nothing to shard over; run more ranks than stages");
      if (pipeline.replicas() == 1) return train(shard, pipeline);
      if constexpr (sharding == Sharding::with) {
        if (sharded) return with_sharded<Backend>(cli, world, shard, train, pipeline);
      }
      return with_data_parallel<Backend>(cli, world, shard, train, pipeline);
    }
  }
  const DataShard shard{world.rank(), world.size()};
  if constexpr (sharding == Sharding::with) {
    if (sharded) return with_sharded<Backend>(cli, world, shard, train);  // on one rank too, as ZeRO on one GPU
  }
  if (world.size() == 1) return train(DataShard{});
  return with_data_parallel<Backend>(cli, world, shard, train);
}

}  // namespace examples
