// Pipeline under mpiexec -n 2, 3, 4 and 8: the world as S = N stages, and (on an even world) as a
// grid of N/2 data-parallel replicas x 2 stages (from 8 ranks also N/4 x 4); both schedules, with
// and without activation checkpointing, end with the serial run's weights. 1F1B holds at most
// S - stage micro-batches of activations where GPipe holds M; a Segmentation task's losses and
// weights equal the serial run's; bad grids and too-short models fail on every rank; ranks whose
// loaders give different numbers of batches train the fewest, or fail naming the ranks and their
// counts.
#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/tasks/segmentation.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/compare.hpp"
#include "../common/list_loader.hpp"
#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(pipeline_test)

namespace {

// Past 4 ranks 4 rows a rank: a grid replica's rows fill 4 micro-batches.
std::int64_t global_batch() { return test::global_batch_for(12, 4); }
constexpr int steps = 3;
constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

// Inputs of 2 x height x height.
std::shared_ptr<Sequential<float>> make_net(std::int64_t height = 8) {
  manual_seed(7);
  Conv2dOptions same;
  same.pad_h = same.pad_w = 1;
  return std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Conv2d<float>>(2, 4, 3, same), make<ReLU<float>>(), make<Conv2d<float>>(4, 4, 3, same),
      make<MaxPool2d<float>>(2), make<Flatten<float>>(), make<Linear<float>>(4 * (height / 2) * (height / 2), 8), make<ReLU<float>>(),
      make<Linear<float>>(8, 3)});
}

std::shared_ptr<Sgd<float>> make_sgd(Module<float>& net) {
  return std::make_shared<Sgd<float>>(net.parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3});
}

struct Batches {
  std::vector<Tensor<float>> inputs;
  std::vector<std::vector<std::int64_t>> targets;
};

Batches make_batches(std::int64_t height = 8) {
  Rng rng(99);
  Batches b;
  for (int s = 0; s < steps; ++s) {
    Tensor<float> x({global_batch(), 2, height, height});
    for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
    std::vector<std::int64_t> y;
    for (std::int64_t i = 0; i < global_batch(); ++i) y.push_back(static_cast<std::int64_t>(rng.below(3)));
    b.inputs.push_back(x);
    b.targets.push_back(y);
  }
  return b;
}

using Weights = std::map<std::string, Tensor<float>>;

Weights weights_of(Module<float>& m) {
  Weights out;
  for (auto& [name, p] : m.named_parameters()) out[name] = p.value().clone();
  return out;
}

Weights serial_weights(const Batches& data) {
  auto net = make_net();
  Trainer<Sequential<float>> trainer(net, make_sgd(*net), quiet);
  for (int s = 0; s < steps; ++s) trainer.train_step(data.inputs[s], data.targets[s]);
  return weights_of(*net);
}

// Every parameter this rank's stage trained equals the serial run's within 1e-5 (relative to the
// weight's size, at least 1): fp32 sums in another order. The stages together hold each of the
// serial model's parameters once a replica (a stage of layers without parameters holds none: 8
// stages of this 8-layer net).
void check_stage(MpiComm& world, const Weights& stage, const Weights& serial, const std::string& what,
                 int replicas = 1) {
  double held = static_cast<double>(stage.size());
  world.allreduce_sum(std::span<double>(&held, 1));
  BOOST_TEST(held == static_cast<double>(serial.size()) * replicas, what << ": the stages hold " << held
                                                                        << " parameters in all");
  for (const auto& [name, w] : stage)
    BOOST_TEST(test::worst_error(w, serial.at(name)) <= 1e-5, what << ": " << name);
}

template <class Schedule>
Weights pipelined_weights(MpiComm& world, const Batches& data, bool checkpoint) {
  auto net = make_net();
  using P = Pipeline<4, Schedule>;
  Trainer<Sequential<float>, P> trainer(net, make_sgd(*net), quiet,
                                        P(world, {.checkpoint = checkpoint, .print_plan = false}));
  for (int s = 0; s < steps; ++s) trainer.train_step(data.inputs[s], data.targets[s]);
  return weights_of(trainer.local_model());
}

// stages x (world / stages) grid: replica r trains on its rows of every batch.
template <class Schedule>
Weights grid_weights(MpiComm& world, const Batches& data, bool checkpoint, int stages = 2) {
  auto net = make_net();
  using P = Pipeline<4, Schedule>;
  using DP = DataParallel<MpiAllreduce>;
  P pipeline(world, {.stages = stages, .checkpoint = checkpoint, .print_plan = false});
  const std::int64_t rows = global_batch() / pipeline.replicas(), begin = pipeline.replica() * rows;
  Trainer<Sequential<float>, DP, P> trainer(net, make_sgd(*net), quiet, DP(world), pipeline);
  for (int s = 0; s < steps; ++s) {
    const std::vector<std::int64_t> y(data.targets[s].begin() + begin, data.targets[s].begin() + begin + rows);
    trainer.train_step(data.inputs[s].slice(begin, begin + rows).clone(), y);
  }
  return weights_of(trainer.local_model());
}

// Segmentation: a class of 3 per pixel of 2 x 6 x 6 inputs, convolutions that keep the size.
constexpr std::int64_t pixel_classes = 3, side = 6;
const Segmentation segmentation{.classes = pixel_classes};

std::shared_ptr<Sequential<float>> make_pixel_net() {
  manual_seed(11);
  Conv2dOptions same;
  same.pad_h = same.pad_w = 1;
  return std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Conv2d<float>>(2, 4, 3, same), make<ReLU<float>>(), make<Conv2d<float>>(4, 4, 3, same), make<ReLU<float>>(),
      make<Conv2d<float>>(4, 4, 3, same), make<ReLU<float>>(), make<Conv2d<float>>(4, pixel_classes, 1)});
}

struct MaskBatches {
  std::vector<Tensor<float>> inputs;
  std::vector<Tensor<std::int64_t>> masks;
};

MaskBatches make_mask_batches() {
  Rng rng(5);
  MaskBatches b;
  for (int s = 0; s < steps; ++s) {
    Tensor<float> x({global_batch(), 2, side, side});
    for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
    Tensor<std::int64_t> y({global_batch(), side, side});
    for (std::int64_t i = 0; i < y.numel(); ++i) y[i] = static_cast<std::int64_t>(rng.below(pixel_classes));
    b.inputs.push_back(x);
    b.masks.push_back(y);
  }
  return b;
}

struct SegmentationRun {
  std::vector<double> losses;  // each step's batch loss
  Weights weights;
};

SegmentationRun serial_segmentation(const MaskBatches& data) {
  auto net = make_pixel_net();
  Trainer<Sequential<float>, Segmentation> trainer(net, make_sgd(*net), quiet, segmentation);
  SegmentationRun run;
  for (int s = 0; s < steps; ++s) run.losses.push_back(trainer.train_step(data.inputs[s], data.masks[s]).loss());
  run.weights = weights_of(*net);
  return run;
}

// Only the last stage scores the micro-batches: the pipeline's reduce brings the step's sums to every stage.
template <class Schedule>
SegmentationRun pipelined_segmentation(MpiComm& world, const MaskBatches& data) {
  auto net = make_pixel_net();
  using P = Pipeline<4, Schedule>;
  Trainer<Sequential<float>, P, Segmentation> trainer(net, make_sgd(*net), quiet, P(world, {.print_plan = false}),
                                                      segmentation);
  SegmentationRun run;
  for (int s = 0; s < steps; ++s) {
    std::vector<double> sums = trainer.train_step(data.inputs[s], data.masks[s]).flat();
    sums.resize(3 + segmentation.state_size(), 0.0);
    trainer.template policy<P>().reduce(std::span<double>(sums));
    run.losses.push_back(EpochTotals::from_flat(sums).loss());
  }
  run.weights = weights_of(trainer.local_model());
  return run;
}

// The first `count` batches of `data`: every rank reads the same batches, some ranks more of them.
test::ListLoader<float> loader_of(const Batches& data, int count) {
  test::ListLoader<float> loader;
  for (int b = 0; b < count; ++b) loader.batches.push_back({data.inputs[b], data.targets[b]});
  return loader;
}

bool says(const Error& e, const std::string& part) {
  const bool found = std::string(e.what()).find(part) != std::string::npos;
  if (!found) BOOST_TEST_MESSAGE("message was: " << e.what());
  return found;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_rank_a_stage_equals_the_serial_run) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const auto serial = serial_weights(data);
  for (bool checkpoint : {false, true}) {
    const std::string with = checkpoint ? " with checkpointing" : "";
    check_stage(world, pipelined_weights<GPipe>(world, data, checkpoint), serial, "GPipe" + with);
    check_stage(world, pipelined_weights<OneFOneB>(world, data, checkpoint), serial, "1F1B" + with);
  }
}

BOOST_AUTO_TEST_CASE(a_segmentation_task_equals_the_serial_run_in_losses_and_weights) {
  MpiComm world(test::session());
  const auto data = make_mask_batches();
  const auto serial = serial_segmentation(data);
  const auto check_run = [&](const SegmentationRun& run, const std::string& what) {
    BOOST_REQUIRE_EQUAL(run.losses.size(), serial.losses.size());
    double worst = 0;
    for (std::size_t s = 0; s < run.losses.size(); ++s)
      worst = std::max(worst, std::abs(run.losses[s] - serial.losses[s]) / std::abs(serial.losses[s]));
    BOOST_TEST(worst <= 1e-5, what << ": losses differ by " << worst << " relative");
    double worst_weight = 0;
    for (const auto& [name, w] : run.weights)
      worst_weight = std::max(worst_weight, test::worst_error(w, serial.weights.at(name)));
    BOOST_TEST_MESSAGE(what << ", stage " << world.rank() << " of " << world.size() << ": worst loss difference "
                            << worst << ", worst weight difference " << worst_weight << " (relative)");
    check_stage(world, run.weights, serial.weights, what + " (Segmentation)");
  };
  check_run(pipelined_segmentation<GPipe>(world, data), "GPipe");
  check_run(pipelined_segmentation<OneFOneB>(world, data), "1F1B");
}

BOOST_AUTO_TEST_CASE(data_by_pipeline_grid_equals_the_serial_run_or_fails_on_an_odd_world) {
  MpiComm world(test::session());
  const auto data = make_batches();
  if (world.size() % 2 != 0) {
    // Every rank refuses before any message is sent, so none waits for another.
    BOOST_CHECK_EXCEPTION(Pipeline<4>(world, {.stages = 2}), Error,
                          [](const Error& e) { return says(e, "cannot be cut into 2-stage pipelines"); });
    return;
  }
  const auto serial = serial_weights(data);
  for (bool checkpoint : {false, true}) {
    const std::string with = checkpoint ? " with checkpointing" : "";
    check_stage(world, grid_weights<GPipe>(world, data, checkpoint), serial, "grid GPipe" + with, world.size() / 2);
    check_stage(world, grid_weights<OneFOneB>(world, data, checkpoint), serial, "grid 1F1B" + with, world.size() / 2);
  }
  // From 8 ranks also N/4 replicas x 4 stages (8 ranks: 4 x 2 above, 2 x 4 here).
  if (world.size() >= 8 && world.size() % 4 == 0) {
    check_stage(world, grid_weights<GPipe>(world, data, false, 4), serial, "4-stage grid GPipe", world.size() / 4);
    check_stage(world, grid_weights<OneFOneB>(world, data, true, 4), serial, "4-stage grid 1F1B with checkpointing",
                world.size() / 4);
  }
}

BOOST_AUTO_TEST_CASE(one_f_one_b_holds_at_most_s_micro_batches_where_gpipe_holds_m) {
  MpiComm world(test::session());
  const auto data = make_batches(32);
  const auto stats = [&]<class Schedule>(Schedule) {
    // Convolutions that keep the 32x32 size: every stage's activations are far above its weights.
    manual_seed(3);
    Conv2dOptions same;
    same.pad_h = same.pad_w = 1;
    auto net = std::make_shared<Sequential<float>>();
    net->push_back(make<Conv2d<float>>(2, 4, 3, same));
    for (int i = 0; i < 3; ++i) {
      net->push_back(make<ReLU<float>>());
      net->push_back(make<Conv2d<float>>(4, 4, 3, same));
    }
    net->push_back(make<AdaptiveAvgPool2d<float>>(1));
    net->push_back(make<Flatten<float>>());
    net->push_back(make<Linear<float>>(4, 3));
    using P = Pipeline<8, Schedule>;
    Trainer<Sequential<float>, P> trainer(net, make_sgd(*net), quiet, P(world, {.print_plan = false}));
    trainer.train_step(data.inputs[0], data.targets[0]);
    return trainer.template policy<P>().last_step();
  };
  const PipelineStepStats gpipe = stats(GPipe{}), one_f_one_b = stats(OneFOneB{});
  const int stage = world.rank(), in_flight = world.size() - stage;
  BOOST_TEST(gpipe.peak_live_micro_batches == 8);
  BOOST_TEST(one_f_one_b.peak_live_micro_batches == in_flight);
  // Live bytes, measured: GPipe's peak holds the whole batch, 1F1B's at most S - stage micro-batches
  // of the largest (12 rows in 8 micro-batches: 2, 2, 2, 2, 1, 1, 1, 1), plus gradients and messages
  // in flight, so the ratio is at least 12 / (2 (S - stage)) / 2.
  const double largest = static_cast<double>((global_batch() + 7) / 8);
  BOOST_TEST_MESSAGE("stage " << stage << ": peak activation bytes GPipe " << gpipe.peak_activation_bytes << ", 1F1B "
                              << one_f_one_b.peak_activation_bytes);
  BOOST_TEST(gpipe.peak_activation_bytes > 0);
  BOOST_TEST(static_cast<double>(gpipe.peak_activation_bytes) >=
             static_cast<double>(global_batch()) / (largest * in_flight) / 2 *
                 static_cast<double>(one_f_one_b.peak_activation_bytes));
}

// Rank r's loader has 1 + min(r, 1) batches: without an agreement the last stages would wait for
// a second batch's messages the first stage never sends. Every rank trains 1 batch per epoch, and
// two epochs end with the weights of the serial run's two steps on that batch.
BOOST_AUTO_TEST_CASE(ranks_with_different_batch_counts_train_the_fewest) {
  MpiComm world(test::session());
  const auto data = make_batches();
  auto serial_net = make_net();
  Trainer<Sequential<float>> serial(serial_net, make_sgd(*serial_net), quiet);
  auto one_batch = loader_of(data, 1);
  serial.fit(one_batch, 2);

  auto net = make_net();
  using P = Pipeline<4>;
  Trainer<Sequential<float>, P> trainer(net, make_sgd(*net), quiet, P(world, {.print_plan = false}));
  auto loader = loader_of(data, 1 + std::min(world.rank(), 1));
  trainer.fit(loader, 2);
  BOOST_TEST(trainer.global_step() == 2);
  check_stage(world, weights_of(trainer.local_model()), weights_of(*serial_net), "uneven loaders");
}

// Counts that cannot be reconciled end every rank with one message naming the ranks and their
// counts: a rank without a batch, or any difference under UnevenInputs::fail.
BOOST_AUTO_TEST_CASE(unreconcilable_batch_counts_name_the_ranks_and_their_counts) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const auto expect_failure = [&](UnevenInputs policy, int count, const std::string& expected) {
    auto net = make_net();
    using P = Pipeline<4>;
    Trainer<Sequential<float>, P> trainer(net, make_sgd(*net), quiet,
                                          P(world, {.print_plan = false, .uneven_inputs = policy}));
    auto loader = loader_of(data, count);
    BOOST_CHECK_EXCEPTION(trainer.fit(loader, 1), Error, [&](const Error& e) { return says(e, expected); });
    BOOST_TEST(trainer.global_step() == 0);
  };
  const int last = world.size() - 1;
  std::string others = last == 1 ? "rank 0" : "ranks 0";
  for (int r = 1; r < last; ++r) others += ", " + std::to_string(r);
  expect_failure(UnevenInputs::shortest, world.rank() == last ? 0 : 2,
                 "Pipeline: the ranks' loaders give different numbers of batches in epoch 1: 2 on " + others +
                     "; 0 on rank " + std::to_string(last) + ". A rank without a batch");
  expect_failure(UnevenInputs::fail, world.rank() == last ? 3 : 2,
                 "in epoch 1: 3 on rank " + std::to_string(last) + "; 2 on " + others +
                     " (PipelineOptions::uneven_inputs is UnevenInputs::fail");
}

BOOST_AUTO_TEST_CASE(fewer_layers_than_stages_fails_on_every_rank) {
  MpiComm world(test::session());
  auto net = std::make_shared<Sequential<float>>();
  for (int i = 0; i + 1 < world.size(); ++i) net->push_back(make<Linear<float>>(4, 4));
  BOOST_CHECK_EXCEPTION((Trainer<Sequential<float>, Pipeline<2>>(net, make_sgd(*net), quiet, Pipeline<2>(world))),
                        Error, [&](const Error& e) {
                          return says(e, "has " + std::to_string(world.size() - 1) + " layer(s) for " +
                                             std::to_string(world.size()) + " stages");
                        });
}

BOOST_AUTO_TEST_CASE(more_ranks_than_stages_without_data_parallel_is_refused) {
  MpiComm world(test::session());
  if (world.size() < 4 || world.size() % 2 != 0) return;  // needs at least 2 replicas of 2 stages
  auto net = make_net();
  BOOST_CHECK_EXCEPTION(
      (Trainer<Sequential<float>, Pipeline<2>>(net, make_sgd(*net), quiet, Pipeline<2>(world, {.stages = 2}))), Error,
      [](const Error& e) { return says(e, "add DataParallel"); });
}

BOOST_AUTO_TEST_SUITE_END()
