#pragma once
// The main() of an example without pipelines: parse the flags (adding the strategy's), start MPI
// and call train(world, shard, policies...) with the policies the flags and the world choose.
#include <ptrain/mpi.hpp>

#include "cli.hpp"
#include "strategy.hpp"

namespace examples {

template <class Train>
int parse_and_run(Cli& cli, int argc, char** argv, Train&& train) {
  add_strategy_options(cli);
  int code = 0;
  if (!cli.parse(argc, argv, code)) return code;
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    return with_strategy(cli, world,
                         [&](DataShard shard, auto... policies) { return train(world, shard, policies...); });
  });
}

}  // namespace examples
