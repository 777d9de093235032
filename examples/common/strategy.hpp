#pragma once
// The parallel strategy of an example, chosen by flags among compiled-in instantiations:
//   one process                      no policy
//   mpiexec -n N                     DataParallel<MpiAllreduce, --compression> (NcclAllreduce on
//                                    the GPUs of a CUDA build)
//   --stages S                       Pipeline<4, --schedule> over S ranks; with N > S ranks also
//                                    DataParallel over the N/S replicas of each stage (only in
//                                    examples that compile the pipelines in: with_pipelines)
// train(shard, policies...) is called with the matching policies, and what it returns is returned;
// shard says which part of each global batch this rank loads (its data-parallel replica).
#include <string>

#include <ptrain/mpi.hpp>

#include "cli.hpp"

namespace examples {

struct DataShard {
  int index = 0, count = 1;
};

enum class Pipelines { without, with };

inline void add_strategy_options(Cli& cli, Pipelines pipelines = Pipelines::without) {
  cli.choice_option("--compression", "fp32", {"fp32", "fp16", "bf16"}, "gradients on the wire when data-parallel");
  if (pipelines == Pipelines::with)
    cli.integer_option("--stages", 0, "pipeline stages (0: no pipeline); the world must be a multiple of it", 0)
        .choice_option("--schedule", "1f1b", {"gpipe", "1f1b"}, "pipeline schedule (4 micro-batches per batch)")
        .integer_option("--checkpoint", 0, "1: recompute each pipeline stage's activations in backward", 0, 1);
}

// DataParallel<Backend, --compression> over comm (MpiAllreduce over the world, or NcclAllreduce
// over an NcclComm in the examples' CUDA builds). Returns what train returns.
template <class Backend = ptrain::MpiAllreduce, class Comm, class Train>
auto with_data_parallel(const Cli& cli, Comm& comm, DataShard shard, Train&& train, auto... others) {
  using ptrain::DataParallel;
  const std::string wire = cli.str("--compression");
  if (wire == "fp32") return train(shard, DataParallel<Backend, ptrain::Fp32>(comm), others...);
  if (wire == "fp16") return train(shard, DataParallel<Backend, ptrain::Fp16>(comm), others...);
  if (wire == "bf16") return train(shard, DataParallel<Backend, ptrain::Bf16>(comm), others...);
  ptrain::fail("--compression '", wire, "': expected fp32, fp16 or bf16");
}

// Over world: an MpiComm (a model in host memory), or in the CUDA builds an NcclComm with
// Backend = NcclAllreduce (a model on the GPUs; pipeline messages go over NCCL too).
template <Pipelines pipelines = Pipelines::without, class Backend = ptrain::MpiAllreduce, class Comm, class Train>
auto with_strategy(const Cli& cli, Comm& world, Train&& train) {
  if constexpr (pipelines == Pipelines::with) {
    if (const int stages = static_cast<int>(cli.integer("--stages")); stages != 0) {
      const auto pipelined = [&]<class Schedule>(Schedule) {
        ptrain::Pipeline<4, Schedule> pipeline(world,
                                               {.stages = stages, .checkpoint = cli.integer("--checkpoint") != 0});
        const DataShard shard{pipeline.replica(), pipeline.replicas()};
        if (pipeline.replicas() == 1) return train(shard, pipeline);
        return with_data_parallel<Backend>(cli, world, shard, train, pipeline);
      };
      const std::string schedule = cli.str("--schedule");
      if (schedule == "gpipe") return pipelined(ptrain::GPipe{});
      if (schedule == "1f1b") return pipelined(ptrain::OneFOneB{});
      ptrain::fail("--schedule '", schedule, "': expected gpipe or 1f1b");
    }
  }
  if (world.size() == 1) return train(DataShard{});
  return with_data_parallel<Backend>(cli, world, DataShard{world.rank(), world.size()}, train);
}

}  // namespace examples
