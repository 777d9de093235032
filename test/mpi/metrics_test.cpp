// Metrics under mpiexec -n 2 and -n 3: each rank counts its own shard (one rank none at all),
// and the reduced counts equal the counts of the whole data in one process; so do a task's
// metrics from Trainer::evaluate under DataParallel (Segmentation's IoU and Dice,
// SequenceModelling's perplexity).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/tasks/metrics.hpp>
#include <ptrain/tasks/segmentation.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>
#include <ptrain/train/trainer.hpp>

#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(metrics_test)

namespace {

// The whole data set, the same on every rank: n items of scores [C, pixels...] and targets.
struct Data {
  Tensor<float> scores;
  std::vector<std::int64_t> targets;
  std::int64_t per_item;  // targets per item
};

Data make_data(const Shape& shape, std::int64_t ignore, std::uint64_t seed) {
  Rng rng(seed);
  Data d{Tensor<float>(shape), {}, shape.numel() / shape[0] / shape[1]};
  for (std::int64_t i = 0; i < d.scores.numel(); ++i) d.scores[i] = static_cast<float>(rng.below(4));  // ties
  for (std::int64_t i = 0; i < shape[0] * d.per_item; ++i)
    d.targets.push_back(rng.bernoulli(0.1) ? ignore : static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(shape[1]))));
  return d;
}

// The items whose index i has owner(i) == rank.
template <class Owner>
Data shard(const Data& all, int rank, Owner owner) {
  std::vector<std::int64_t> items;
  for (std::int64_t i = 0; i < all.scores.size(0); ++i)
    if (owner(i) == rank) items.push_back(i);
  Shape shape = all.scores.shape();
  shape[0] = static_cast<std::int64_t>(items.size());
  Data part{Tensor<float>(shape), {}, all.per_item};
  const std::int64_t item = all.scores.numel() / all.scores.size(0);
  for (std::size_t k = 0; k < items.size(); ++k) {
    part.scores.slice(static_cast<std::int64_t>(k), static_cast<std::int64_t>(k) + 1)
        .copy_from(all.scores.slice(items[k], items[k] + 1));
    const auto first = all.targets.begin() + items[k] * all.per_item;
    part.targets.insert(part.targets.end(), first, first + all.per_item);
  }
  return part;
}

// Evaluation data for Trainer::evaluate: batches of at most two items, in item order.
struct TaskBatch {
  Tensor<double> inputs;
  Tensor<std::int64_t> targets;
};

// A list of them as a loader (Trainer's Loader: set_epoch, size, begin and end).
struct TaskBatches : std::vector<TaskBatch> {
  void set_epoch(int) {}
};

// The items (rows of inputs and targets) whose index i has i % ranks == rank.
TaskBatches batches_of(const Tensor<double>& inputs, const Tensor<std::int64_t>& targets, int rank,
                                  int ranks) {
  std::vector<std::int64_t> items;
  for (std::int64_t i = rank; i < inputs.size(0); i += ranks) items.push_back(i);
  TaskBatches batches;
  for (std::size_t k = 0; k < items.size(); k += 2) {
    const std::size_t n = std::min<std::size_t>(2, items.size() - k);
    Shape in = inputs.shape(), out = targets.shape();
    in[0] = out[0] = static_cast<std::int64_t>(n);
    TaskBatch b{Tensor<double>(in), Tensor<std::int64_t>(out)};
    for (std::size_t j = 0; j < n; ++j) {
      const auto row = static_cast<std::int64_t>(j), item = items[k + j];
      b.inputs.slice(row, row + 1).copy_from(inputs.slice(item, item + 1));
      b.targets.slice(row, row + 1).copy_from(targets.slice(item, item + 1));
    }
    batches.push_back(b);
  }
  return batches;
}

// [N, L * V] -> [N, L, V]: a row of scores over the vocabulary per position.
class PerPosition : public Module<double> {
 public:
  PerPosition(std::int64_t length, std::int64_t vocabulary) : length_(length), vocabulary_(vocabulary) {}
  Var<double> forward(const Var<double>& x) override { return reshape(x, {x.shape()[0], length_, vocabulary_}); }

 private:
  std::int64_t length_, vocabulary_;
};

// Trainer::evaluate's metrics and loss on the whole data in one process, and on this rank's shard
// under DataParallel, from the same weights.
template <class TaskType>
void evaluate_serial_and_sharded(MpiComm& world, const std::function<std::shared_ptr<Sequential<double>>()>& make_model,
                                 const TaskType& task, const Tensor<double>& inputs,
                                 const Tensor<std::int64_t>& targets) {
  const TrainerOptions quiet{.progress_bar = false, .print_epochs = false};
  const auto sgd = [](Sequential<double>& net) { return std::make_shared<Sgd<double>>(net.parameters(), SgdOptions{.lr = 0.1}); };
  auto whole_model = make_model();
  Trainer<Sequential<double>, TaskType> serial(whole_model, sgd(*whole_model), quiet, task);
  auto all = batches_of(inputs, targets, 0, 1);
  const EpochTotals whole = serial.evaluate(all);
  using DP = DataParallel<MpiAllreduce>;
  auto shard_model = make_model();
  Trainer<Sequential<double>, DP, TaskType> sharded(shard_model, sgd(*shard_model), quiet, DP(world), task);
  auto mine = batches_of(inputs, targets, world.rank(), world.size());
  const EpochTotals reduced = sharded.evaluate(mine);
  BOOST_TEST(reduced.samples == static_cast<double>(inputs.size(0)));
  BOOST_TEST(reduced.loss() == whole.loss(), boost::test_tools::tolerance(1e-12));
  const MetricValues got = sharded.metrics(reduced), expected = serial.metrics(whole);
  BOOST_REQUIRE(got.names == expected.names);
  double worst = 0;
  for (std::size_t i = 0; i < got.values.size(); ++i) {
    BOOST_TEST(std::isfinite(expected.values[i]), expected.names[i]);
    const double error = std::abs(got.values[i] - expected.values[i]) / std::max(1.0, std::abs(expected.values[i]));
    BOOST_TEST(error <= 1e-12, expected.names[i] << ": " << got.values[i] << " over the ranks, " << expected.values[i]
                                                 << " on the whole data");
    worst = std::max(worst, error);
  }
  BOOST_TEST_MESSAGE(world.size() << " ranks: worst metric difference " << worst << " relative; " << expected.names[0]
                                  << " " << expected.values[0] << ", loss " << whole.loss() << " vs " << reduced.loss());
}

}  // namespace

BOOST_AUTO_TEST_CASE(top_k_reduced_over_ranks_equals_the_whole_data) {
  MpiComm world(test::session());
  const Data all = make_data({37, 7}, 0, 1);  // classification: no ignored label
  TopKAccuracy whole({1, 5});
  whole.update(all.scores, all.targets);
  const Data mine = shard(all, world.rank(), [&](std::int64_t i) { return static_cast<int>(i % world.size()); });
  TopKAccuracy local({1, 5});
  local.update(mine.scores, mine.targets);
  const auto reduced = local.reduced(world);
  BOOST_TEST(reduced.samples() == 37);
  BOOST_TEST(reduced.correct(1) == whole.correct(1));
  BOOST_TEST(reduced.correct(5) == whole.correct(5));
  BOOST_TEST(whole.correct(1) < whole.correct(5));
  BOOST_TEST(local.samples() == static_cast<std::int64_t>(mine.targets.size()));  // the local counts stay
}

BOOST_AUTO_TEST_CASE(confusion_matrix_reduced_over_ranks_equals_the_whole_data) {
  MpiComm world(test::session());
  const Data all = make_data({11, 5, 3, 4}, 255, 2);  // segmentation: 11 images of 3x4 pixels
  ConfusionMatrix whole(5, 255);
  whole.update(all.scores, all.targets);
  // The last rank holds no image.
  const int holders = world.size() - 1;
  const Data mine = shard(all, world.rank(), [&](std::int64_t i) { return static_cast<int>(i % holders); });
  ConfusionMatrix local(5, 255);
  if (world.rank() < holders) local.update(mine.scores, mine.targets);
  const auto reduced = local.reduced(world);
  BOOST_TEST(reduced.counts() == whole.counts(), boost::test_tools::per_element());
  BOOST_TEST(reduced.total() > 0);
  BOOST_TEST(reduced.total() < 11 * 12);  // some pixels were void
  const auto iou = reduced.iou(), whole_iou = whole.iou();
  for (std::size_t c = 0; c < iou.size(); ++c) BOOST_TEST(iou[c] == whole_iou[c]);
  BOOST_TEST(reduced.mean_iou() == whole.mean_iou());
  BOOST_TEST(reduced.mean_dice() == whole.mean_dice());
}

BOOST_AUTO_TEST_CASE(segmentation_iou_and_dice_evaluated_over_ranks_equal_the_whole_data) {
  MpiComm world(test::session());
  constexpr std::int64_t classes = 3;
  const auto net = [=] {
    manual_seed(21);
    Conv2dOptions same;
    same.pad_h = same.pad_w = 1;
    return std::make_shared<Sequential<double>>(std::initializer_list<std::shared_ptr<Module<double>>>{
        make<Conv2d<double>>(2, classes, 3, same)});
  };
  Rng rng(3);
  Tensor<double> images({13, 2, 5, 4});
  for (std::int64_t i = 0; i < images.numel(); ++i) images[i] = rng.normal();
  Tensor<std::int64_t> masks({13, 5, 4});
  for (std::int64_t i = 0; i < masks.numel(); ++i) masks[i] = static_cast<std::int64_t>(rng.below(classes));
  evaluate_serial_and_sharded(world, net, Segmentation{.classes = classes}, images, masks);
}

BOOST_AUTO_TEST_CASE(sequence_perplexity_evaluated_over_ranks_equals_the_whole_data) {
  MpiComm world(test::session());
  constexpr std::int64_t length = 5, vocabulary = 6, ignored = -1;
  const auto net = [=] {
    manual_seed(22);
    return std::make_shared<Sequential<double>>(std::initializer_list<std::shared_ptr<Module<double>>>{
        make<Linear<double>>(4, length * vocabulary), make<PerPosition>(length, vocabulary)});
  };
  Rng rng(4);
  Tensor<double> features({13, 4});
  for (std::int64_t i = 0; i < features.numel(); ++i) features[i] = rng.normal();
  // Padding at the end of some sequences: the ranks hold different numbers of tokens.
  Tensor<std::int64_t> tokens({13, length});
  for (std::int64_t s = 0; s < 13; ++s) {
    const auto kept = 1 + static_cast<std::int64_t>(rng.below(length));
    for (std::int64_t p = 0; p < length; ++p)
      tokens[s * length + p] = p < kept ? static_cast<std::int64_t>(rng.below(vocabulary)) : ignored;
  }
  evaluate_serial_and_sharded(world, net, SequenceModelling{.ignore_index = ignored}, features, tokens);
}

BOOST_AUTO_TEST_SUITE_END()
