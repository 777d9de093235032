// The headline configuration, emulated: Trainer<Sequential<float, D>, DataParallel<MpiAllreduce,
// Fp16>, Pipeline<4, Schedule>> with the model on HostEmulated (the GPU algorithms on the host,
// messages in its memory) under mpiexec -n 2 and -n 3, as a pipeline of one stage per rank and as
// one-stage pipelines data-parallel over every rank, equals the same Trainer on the CPU: the
// same losses, and each stage's weights after three steps.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/device_mlp.hpp"  // relative_difference
#include "../common/small_resnet.hpp"
#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(device_pipeline_test)

namespace {

constexpr std::int64_t replica_batch = 6, classes = 5;
constexpr int steps = 3;

struct Batch {
  Tensor<float> images;
  std::vector<std::int64_t> labels;
};

// Replica r's batch of step s: every stage of a pipeline reads the same targets.
Batch batch(int replica, int step) {
  Rng rng(100 * static_cast<std::uint64_t>(step) + static_cast<std::uint64_t>(replica));
  Tensor<float> x({replica_batch, 3, 8, 8});
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < replica_batch; ++i) y.push_back(static_cast<std::int64_t>(rng.below(classes)));
  return {x, y};
}

struct RunResult {
  std::vector<double> losses;
  std::vector<Tensor<float>> stage_weights;
  int stage = 0;
};

template <class D, class Schedule>
RunResult train(MpiComm& world, int stages) {
  auto model = test::small_resnet<float, D>(21, classes);
  auto sgd = std::make_shared<Sgd<float, D>>(model->parameters(), SgdOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
  using Dp = DataParallel<MpiAllreduce, Fp16>;
  using Pipe = Pipeline<4, Schedule>;
  Trainer<Sequential<float, D>, Dp, Pipe> trainer(model, sgd, {.progress_bar = false, .print_epochs = false},
                                                  Dp(world), Pipe(world, {.stages = stages, .print_plan = false}));
  const Pipe& pipe = trainer.template policy<Pipe>();
  RunResult r;
  r.stage = pipe.stage();
  for (int step = 0; step < steps; ++step) {
    const Batch b = batch(pipe.replica(), step);
    r.losses.push_back(trainer.train_step(b.images, b.labels).loss_sum);
  }
  for (const auto& p : trainer.local_model().parameters()) r.stage_weights.push_back(p.value().template to<Cpu>());
  return r;
}

template <class Schedule>
void check_device_equals_cpu(int stages) {
  MpiComm world(test::session());
  const RunResult cpu = train<Cpu, Schedule>(world, stages);
  const RunResult device = train<HostEmulated, Schedule>(world, stages);
  BOOST_TEST(device.stage == cpu.stage);
  BOOST_TEST(!device.stage_weights.empty());
  for (std::size_t i = 0; i < cpu.losses.size(); ++i)
    BOOST_TEST(device.losses[i] == cpu.losses[i], boost::test_tools::tolerance(1e-4));
  BOOST_REQUIRE_EQUAL(device.stage_weights.size(), cpu.stage_weights.size());
  for (std::size_t i = 0; i < cpu.stage_weights.size(); ++i) {
    const double difference = test::relative_difference(device.stage_weights[i], cpu.stage_weights[i]);
    // Measured: 6.1e-6 at most (the device ops sum in another order); a lost micro-batch or a
    // gradient not sent back would be off by far more.
    BOOST_TEST(difference <= 1e-4, "stage " << cpu.stage << " weight " << i << " differs by " << difference);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_stage_per_rank_on_a_device_equals_the_cpu_pipeline) {
  check_device_equals_cpu<OneFOneB>(0);  // 0: as many stages as ranks
}

BOOST_AUTO_TEST_CASE(one_stage_pipelines_data_parallel_on_a_device_equal_the_cpu_run) {
  check_device_equals_cpu<GPipe>(1);
}

BOOST_AUTO_TEST_SUITE_END()
