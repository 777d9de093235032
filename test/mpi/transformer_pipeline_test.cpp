// The tutorial's TransformerLM cut into pipeline stages under mpiexec -n 2, 3 and 4 (the world as
// S = N stages; on an even world also a data x 2-stage pipeline grid): with dropout on, both
// schedules give each step's loss and every weight of the same run on one stage with the same
// micro-batches (each layer's dropout masks do not depend on the stage that runs it); with dropout
// off the stages and the grid equal the serial Trainer's run without a pipeline, also with gradient
// clipping (the norm over every stage, not over the replicas).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/comm/self_comm.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/compare.hpp"
#include "mpi_test_main.hpp"
#include "staged_runs.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(transformer_pipeline_test)

namespace {

constexpr std::int64_t vocabulary = 13, batch = 8, length = 6;
constexpr int steps = 3, chunks = 4;
constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};
using Lm = TransformerLM<float>;

std::shared_ptr<Lm> make_lm(double dropout) {
  manual_seed(21);
  return std::make_shared<Lm>(TransformerLMOptions{.ntoken = vocabulary, .ninp = 8, .nhead = 2, .nhid = 12,
                                                   .nlayers = 2, .dropout = dropout, .batch_first = true});
}
std::shared_ptr<Sgd<float>> make_sgd(Module<float>& net) {
  return std::make_shared<Sgd<float>>(net.parameters(), SgdOptions{.lr = 0.5, .momentum = 0.9});
}

// Tokens [N, S] (as floats) and the next token at each position.
struct Batches {
  std::vector<Tensor<float>> inputs;
  std::vector<Tensor<std::int64_t>> targets;
};
Batches make_batches() {
  Rng rng(17);
  Batches b;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::int64_t> stream(static_cast<std::size_t>(batch * (length + 1)));
    for (auto& t : stream) t = static_cast<std::int64_t>(rng.below(vocabulary));
    Tensor<float> x({batch, length});
    Tensor<std::int64_t> y({batch, length});
    for (std::int64_t n = 0; n < batch; ++n)
      for (std::int64_t p = 0; p < length; ++p) {
        x[n * length + p] = static_cast<float>(stream[static_cast<std::size_t>(n * (length + 1) + p)]);
        y[n * length + p] = stream[static_cast<std::size_t>(n * (length + 1) + p + 1)];
      }
    b.inputs.push_back(x);
    b.targets.push_back(y);
  }
  return b;
}

using test::StagedRun;
// The tutorial clips at 0.5; this model's gradients are smaller, so clip at 0.2 to clip every step.
TrainerOptions clipping() {
  TrainerOptions o = quiet;
  o.clip_grad_norm = 0.2;
  return o;
}
StagedRun serial_run(const Batches& data, double dropout, const TrainerOptions& options = quiet) {
  auto lm = make_lm(dropout);
  Trainer<Lm, SequenceModelling> trainer(lm, make_sgd(*lm), options, SequenceModelling{});
  return test::train_rows(trainer, data.inputs, data.targets, 0, batch);
}

// One stage per rank of `world`.
template <class Schedule, class World>
StagedRun pipelined_run(World& world, const Batches& data, double dropout, const TrainerOptions& options = quiet) {
  auto lm = make_lm(dropout);
  using P = Pipeline<chunks, Schedule>;
  Trainer<Lm, P, SequenceModelling> trainer(lm, make_sgd(*lm), options, P(world, {.print_plan = false}),
                                            SequenceModelling{});
  return test::train_rows<P>(trainer, data.inputs, data.targets, 0, batch);
}

// 2 stages x (world / 2) replicas: replica r trains on its rows of every batch.
template <class Schedule>
StagedRun grid_run(MpiComm& world, const Batches& data, const TrainerOptions& options = quiet) {
  auto lm = make_lm(0.0);
  using P = Pipeline<chunks, Schedule>;
  using DP = DataParallel<MpiAllreduce>;
  P pipeline(world, {.stages = 2, .print_plan = false});
  const std::int64_t rows = batch / pipeline.replicas();
  const std::int64_t begin = pipeline.replica() * rows;
  Trainer<Lm, DP, P, SequenceModelling> trainer(lm, make_sgd(*lm), options, DP(world), std::move(pipeline),
                                                SequenceModelling{});
  return test::train_rows<P, DP>(trainer, data.inputs, data.targets, begin, rows);
}

}  // namespace

BOOST_AUTO_TEST_CASE(stages_with_dropout_equal_one_stage_with_the_same_micro_batches) {
  MpiComm world(test::session());
  const auto data = make_batches();
  SelfComm self;
  const StagedRun one_stage = pipelined_run<GPipe>(self, data, 0.2);
  // the reference itself trains with dropout: it differs from the run without
  BOOST_TEST(std::abs(one_stage.losses.back() - pipelined_run<GPipe>(self, data, 0.0).losses.back()) > 1e-4);
  const std::string on = std::to_string(world.size()) + " stages, dropout 0.2";
  test::check_run(pipelined_run<GPipe>(world, data, 0.2), one_stage, "GPipe, " + on);
  test::check_run(pipelined_run<OneFOneB>(world, data, 0.2), one_stage, "1F1B, " + on);
}

BOOST_AUTO_TEST_CASE(stages_without_dropout_equal_the_serial_run) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const StagedRun serial = serial_run(data, 0.0);
  test::check_run(pipelined_run<GPipe>(world, data, 0.0), serial, "GPipe without dropout");
  test::check_run(pipelined_run<OneFOneB>(world, data, 0.0), serial, "1F1B without dropout");
}

// Replicas draw the same masks on different rows, which no one-rank run does: without dropout.
BOOST_AUTO_TEST_CASE(a_data_by_pipeline_grid_equals_the_serial_run) {
  MpiComm world(test::session());
  if (world.size() % 2 != 0) return;  // an odd world makes no 2-stage grid (pipeline_test checks the refusal)
  const auto data = make_batches();
  const StagedRun serial = serial_run(data, 0.0);
  test::check_run(grid_run<GPipe>(world, data), serial, "grid GPipe");
  test::check_run(grid_run<OneFOneB>(world, data), serial, "grid 1F1B");
}

// clip_grad_norm takes the norm over every stage's gradients (averaged over the grid's replicas,
// not summed over them): each step's norm and the clipped weights are the serial run's.
BOOST_AUTO_TEST_CASE(gradient_clipping_over_stages_and_replicas_equals_the_serial_run) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const StagedRun serial = serial_run(data, 0.0, clipping());
  for (double norm : serial.gradient_norms)
    BOOST_TEST(norm > clipping().clip_grad_norm, "a serial step was not clipped: the test proves nothing");
  BOOST_TEST(test::worst_error(serial.weights.at("decoder.weight"), serial_run(data, 0.0).weights.at("decoder.weight")) >
             1e-3);
  test::check_run(pipelined_run<GPipe>(world, data, 0.0, clipping()), serial, "GPipe, clipped");
  test::check_run(pipelined_run<OneFOneB>(world, data, 0.0, clipping()), serial, "1F1B, clipped");
  if (world.size() % 2 == 0) test::check_run(grid_run<OneFOneB>(world, data, clipping()), serial, "grid 1F1B, clipped");
}

BOOST_AUTO_TEST_SUITE_END()
