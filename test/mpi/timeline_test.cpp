// The timeline across ranks (TrainerOptions::timeline): under DataParallel every rank's spans
// reach the one file rank 0 writes, each rank with its tracks, and gradient buckets reduce while
// backward is still running (the overlap DataParallel exists for); under Pipeline every stage's
// micro-batch forwards and backwards, its sends, receives and closing wait are there.
#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/chrome_trace.hpp"
#include "../common/list_loader.hpp"
#include "mpi_test_main.hpp"

using namespace ptrain;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(timeline_test)

namespace {

constexpr int batches = 3;

std::shared_ptr<Sequential<float>> deep_net() {
  manual_seed(21);
  return std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Linear<float>>(6, 16), make<ReLU<float>>(), make<Linear<float>>(16, 16), make<ReLU<float>>(),
      make<Linear<float>>(16, 16), make<ReLU<float>>(), make<Linear<float>>(16, 3)});
}

ListLoader<float> random_batches(int rank) {
  Rng rng(100 + static_cast<std::uint64_t>(rank));
  ListLoader<float> loader;
  for (int b = 0; b < batches; ++b) {
    ListBatch<float> batch{Tensor<float>({8, 6}), {}};
    for (std::int64_t i = 0; i < batch.inputs.numel(); ++i) batch.inputs[i] = static_cast<float>(rng.normal());
    for (int i = 0; i < 8; ++i) batch.targets.push_back(static_cast<std::int64_t>(rng.below(3)));
    loader.batches.push_back(batch);
  }
  return loader;
}

// One path for every rank: rank 0's process id, summed over the world with zeros from the others.
std::filesystem::path shared_path(MpiComm& world, const std::string& name) {
  std::vector<double> pid{world.rank() == 0 ? double(::getpid()) : 0.0};
  world.allreduce_sum(std::span<double>(pid));
  return std::filesystem::temp_directory_path() /
         ("ptrain_" + name + "_" + std::to_string(static_cast<long>(pid[0])) + ".json");
}

bool overlap(const TraceSpan& a, const TraceSpan& b) { return a.ts < b.end() && b.ts < a.end(); }

}  // namespace

BOOST_AUTO_TEST_CASE(data_parallel_buckets_reduce_during_backward_on_every_rank) {
  MpiComm world(test::session());
  const auto path = shared_path(world, "timeline_dp");
  auto net = deep_net();
  auto sgd = std::make_shared<Sgd<float>>(net->parameters(), SgdOptions{.lr = 0.01});
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Sequential<float>, DP> trainer(net, sgd, {.progress_bar = false, .print_epochs = false, .timeline = path.string()},
                                         DP(world, {.bucket_bytes = 64}));  // a bucket per parameter
  auto train = random_batches(world.rank());
  trainer.fit(train, 2);
  if (world.rank() != 0) return;
  const ChromeTrace trace = read_chrome_trace(path);
  std::filesystem::remove(path);
  for (int rank = 0; rank < world.size(); ++rank) {
    BOOST_TEST_CONTEXT("rank " << rank) {
      BOOST_TEST(trace.track_names.at({rank, 0}) == "compute");
      BOOST_TEST(trace.track_names.at({rank, 1}) == "data");
      for (const char* name : {"data", "forward", "backward", "gradient wait", "optimizer"})
        BOOST_TEST(trace.named(name, rank).size() == 2u * batches, name);
      const auto buckets = trace.named("bucket ", rank);
      std::set<std::string> names;
      for (const auto& b : buckets) names.insert(b.name);
      BOOST_TEST(names.size() == 8u);  // 8 parameters, 64 bytes apart
      BOOST_TEST(buckets.size() == 8u * 2 * batches);
      int overlapping = 0;
      for (const auto& b : buckets)
        for (const auto& backward : trace.named("backward", rank)) overlapping += overlap(b, backward) ? 1 : 0;
      BOOST_TEST(overlapping >= 2 * batches);  // at least one bucket in every step's backward
    }
  }
}

BOOST_AUTO_TEST_CASE(pipeline_stages_record_messages_and_micro_batches) {
  MpiComm world(test::session());
  const auto path = shared_path(world, "timeline_pipeline");
  auto net = deep_net();
  auto sgd = std::make_shared<Sgd<float>>(net->parameters(), SgdOptions{.lr = 0.01});
  Trainer<Sequential<float>, Pipeline<2>> trainer(
      net, sgd, {.progress_bar = false, .print_epochs = false, .timeline = path.string()}, Pipeline<2>(world));
  auto train = random_batches(0);  // every stage gets the same targets
  trainer.fit(train, 1);
  if (world.rank() != 0) return;
  const ChromeTrace trace = read_chrome_trace(path);
  std::filesystem::remove(path);
  const int last = world.size() - 1;
  for (int rank = 0; rank <= last; ++rank) {
    BOOST_TEST_CONTEXT("stage " << rank) {
      for (const char* name : {"forward mb 0", "forward mb 1", "backward mb 0", "backward mb 1"})
        BOOST_TEST(trace.named(name, rank).size() == std::size_t{batches}, name);
      BOOST_TEST(trace.named("optimizer", rank).size() == std::size_t{batches});
      BOOST_TEST(trace.named("idle", rank).size() == std::size_t{batches});
      // Activations up and gradients down: every stage sends and receives.
      BOOST_TEST(!trace.named("send mb", rank).empty());
      BOOST_TEST(!trace.named("receive mb", rank).empty());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
