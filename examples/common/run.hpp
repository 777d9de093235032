#pragma once
// The main() of an example without pipelines: parse the flags (adding the strategy's and
// --device), start MPI and call train(device, world, shard, policies...) with a value of the
// device the model trains on and the policies with_strategy chooses: over MPI on the CPU, over
// NCCL on one GPU per rank of a node (--device cuda, in the example's CUDA build).
#include <ptrain/mpi.hpp>
#if defined(__CUDACC__)
#include <ptrain/cuda.hpp>
#include <ptrain/parallel/nccl_allreduce.hpp>
#endif

#include "cli.hpp"
#include "device.hpp"
#include "strategy.hpp"

namespace examples {

template <class Train>
int parse_and_run(Cli& cli, int argc, char** argv, Train&& train) {
  add_strategy_options(cli);
  add_device_option(cli);
  int code = 0;
  if (!cli.parse(argc, argv, code)) return code;
  const auto device = choose_device(cli, cli.program());
  if (!device) return 2;
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
#if defined(__CUDACC__)
    if (*device == DeviceKind::cuda)
      return on_local_gpus(session, world, [&](ptrain::NcclComm& nccl) {
        return with_strategy<Pipelines::without, ptrain::NcclAllreduce>(cli, nccl, [&](DataShard shard, auto... p) {
          return train(ptrain::Cuda{}, world, shard, p...);
        });
      });
#endif
    return with_strategy(cli, world, [&](DataShard shard, auto... policies) {
      return train(ptrain::Cpu{}, world, shard, policies...);
    });
  });
}

}  // namespace examples
