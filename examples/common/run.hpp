#pragma once
// The main() every example shares. An example declares its own flags and hands run_example its
// training function; run_example adds the strategy's flags (common/strategy.hpp), --device and
// the floor on the example's final validation metric, the flags of a launch without mpiexec
// (common/launch.hpp), of checkpoints (common/checkpoints.hpp) and of the training loop's callbacks
// (common/training_loop.hpp: early stopping, top-k checkpoints, EMA, ...), parses, starts MPI through
// run_main (an exception on any rank ends every rank with its message) and calls
//   train(device, world, shard, policies...)
// with a value of the device the model trains on and the policies with_strategy chooses: over MPI
// on the CPU, over NCCL among one GPU per rank of a node (--device cuda, in the example's CUDA
// build). train returns the final validation metric; a run that ends below the floor exits 1 and
// says so, which is how the smoke tests tell a run that learned from one that did not. Rank 0
// ends with three lines a sweep (tools/sweep.py) reads: the final metric, the peak memory (the
// largest resident set of any rank) and the total run time (launch to the end of training), as the
// projects' tables report it.
// --tensorboard DIR and --timeline FILE are every example's too: trainer_options(cli) passes them,
// with the example's own --csv, --accumulate and --val-every, to its Trainer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <ptrain/mpi.hpp>
#if defined(__CUDACC__)
#include <ptrain/cuda.hpp>
#include <ptrain/parallel/nccl_allreduce.hpp>
#endif

#include "checkpoints.hpp"
#include "cli.hpp"
#include "device.hpp"
#include "launch.hpp"
#include "strategy.hpp"

namespace examples {

// What train returns, and the flag setting its floor (or, for a metric where lower is better, its
// ceiling).
struct FinalMetric {
  std::string flag;  // --min-accuracy, --min-iou, --max-perplexity
  std::string name;  // as the run's last lines call it: "test accuracy", "validation IoU of the foreground"
  std::string unit;  // printed after the value: "%" for accuracies in percent
  bool lower_is_better = false;  // perplexity: the flag is a ceiling, any positive value
  // What --early-stop-patience and --keep-top-k watch (common/training_loop.hpp), as the CSV names it.
  ptrain::Monitor monitor{.name = "val_loss"};
};

inline FinalMetric accuracy_percent(std::string name, std::string monitor = "val_accuracy") {
  return {"--min-accuracy", std::move(name), "%", false, {.name = std::move(monitor), .mode = ptrain::BestIs::higher}};
}
inline FinalMetric perplexity(std::string name) {
  return {"--max-perplexity", std::move(name), "", true, {.name = "val_perplexity"}};
}

// True when no floor is set (0) or value reaches it; otherwise rank 0 says by how much it missed.
// A metric that was never measured (NaN: no validation data) misses any floor.
inline bool meets_floor(const Cli& cli, const FinalMetric& metric, double value, bool main) {
  const double floor = cli.real(metric.flag);
  if (floor <= 0 || (metric.lower_is_better ? value <= floor : value >= floor)) return true;
  if (main)
    std::fprintf(stderr, "%s: the final %s %.4g%s is %s %s %.4g%s: the run did not learn enough\n",
                 cli.program().c_str(), metric.name.c_str(), value, metric.unit.c_str(),
                 metric.lower_is_better ? "above" : "below", metric.flag.c_str(), floor, metric.unit.c_str());
  return false;
}

// This process's peak resident set so far (getrusage's ru_maxrss, in KiB on Linux), in MiB.
inline double peak_resident_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;
}

// The run's closing lines on rank 0 (every rank calls it: the peak memory is gathered).
inline void print_run_summary(ptrain::MpiComm& world, const FinalMetric& metric, double value,
                              std::chrono::steady_clock::time_point start) {
  const double mine = peak_resident_mib();
  std::vector<double> peaks(static_cast<std::size_t>(world.size()));
  world.allgather(std::span<const double>(&mine, 1), std::span<double>(peaks));
  if (world.rank() != 0) return;
  double largest = 0;
  for (double peak : peaks) largest = std::max(largest, peak);
  std::printf("final %s %.6g%s\n", metric.name.c_str(), value, metric.unit.c_str());
  std::printf("peak memory %.1f MiB (the largest resident set of %d rank(s))\n", largest, world.size());
  std::printf("total run time %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The Trainer's outputs the flags name: --csv (each example declares its own default),
// --tensorboard and --timeline.
// And the loop's: --accumulate, --val-every (common/training_loop.hpp).
inline ptrain::TrainerOptions trainer_options(const Cli& cli) {
  ptrain::TrainerOptions options{
      .csv_log = cli.str("--csv"), .tensorboard = cli.str("--tensorboard"), .timeline = cli.str("--timeline")};
  set_loop_options(cli, options);
  return options;
}

// Examples that compile the pipelines in (--stages) pass Pipelines::with, those that compile
// sharding in (--shard) Sharding::with.
template <Pipelines pipelines = Pipelines::without, Sharding sharding = Sharding::without, class Train>
int run_example(Cli& cli, const FinalMetric& metric, int argc, char** argv, Train&& train) {
  const auto start = std::chrono::steady_clock::now();
  add_strategy_options(cli, pipelines, sharding);
  add_device_option(cli);
  add_launch_options(cli);
  cli.option("--tensorboard", "", "TensorBoard run directory rank 0 writes scalars into, per step and epoch (empty: none)")
      .output_option("--timeline", "",
                     "Chrome trace JSON (chrome://tracing, ui.perfetto.dev) of every rank's steps (empty: none)");
  add_checkpoint_options(cli);
  add_callback_options(cli);
  example_monitor() = metric.monitor;
  if (metric.lower_is_better)
    cli.real_option(metric.flag, "0", "exit with code 1 when the final " + metric.name + " is above this (0: no limit)");
  else
    cli.real_option(metric.flag, "0",
                    "exit with code 1 when the final " + metric.name + " (" +
                        (metric.unit == "%" ? "percent" : "0 to 1") + ") is below this",
                    0, metric.unit == "%" ? 100 : 1);
  int code = 0;
  if (!cli.parse(argc, argv, code)) return code;
  const auto device = choose_device(cli, cli.program());
  if (!device) return 2;
  std::optional<ptrain::UrlLaunch> url;
  if (!url_launch_from(cli, url)) return 2;
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    const auto final_metric = [&] {
#if defined(__CUDACC__)
      if (*device == DeviceKind::cuda)
        return on_local_gpus(session, world, [&](ptrain::NcclComm& nccl) {
          const auto on_gpu = [&](DataShard shard, auto... policies) {
            return static_cast<double>(train(ptrain::Cuda{}, world, shard, policies...));
          };
          return with_strategy<pipelines, ptrain::NcclAllreduce, sharding>(cli, nccl, on_gpu);
        });
#endif
      const auto on_cpu = [&](DataShard shard, auto... policies) {
        return static_cast<double>(train(ptrain::Cpu{}, world, shard, policies...));
      };
      return with_strategy<pipelines, ptrain::MpiAllreduce, sharding>(cli, world, on_cpu);
    };
    const double value = final_metric();
    print_run_summary(world, metric, value, start);
    if (preempted_run()) return 0;  // saved; --resume goes on
    if (lr_find_run()) return 0;    // the finder's run: no training to hold to a floor
    return meets_floor(cli, metric, value, world.rank() == 0) ? 0 : 1;
  }, ptrain::MpiThreading::funneled, std::move(url));
}

}  // namespace examples
