// Callbacks under mpiexec -n 2 and 3 with DataParallel: a stop asked by one rank's callback alone
// (at an epoch's end, and at a validation inside an epoch) ends fit on every rank at the same step;
// EarlyStopping on the reduced validation metric stops every rank at the same epoch;
// ModelCheckpoint's files are written once, whatever the world size.
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/train/callbacks/early_stopping.hpp>
#include <ptrain/train/callbacks/model_checkpoint.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/blobs.hpp"
#include "mpi_test_main.hpp"
#include "shared_dir.hpp"

using namespace ptrain;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(callback_test)

namespace {

using DP = DataParallel<MpiAllreduce>;
constexpr std::int64_t batches_per_epoch = 4;

std::int64_t global_batch() { return test::global_batch_for(12, 3); }

// One rank asks to stop at a given step's validation (mid-epoch or at an epoch's end).
struct StopOnOneRank {
  int my_rank, asking_rank;
  std::int64_t at_step;
  void on_validation_end(TrainerView& view, const ValidationResult& r) {
    if (my_rank == asking_rank && r.step == at_step) view.request_stop("rank " + std::to_string(my_rank) + " asked");
  }
};

struct Outcome {
  std::int64_t steps = 0;
  std::size_t epochs = 0;
  bool stopped = false;
};

template <class... Callbacks>
Outcome fit(MpiComm& world, double lr, std::int64_t val_every, int epochs, Callbacks... callbacks) {
  manual_seed(3);
  auto model = std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Linear<float>>(4, 8), make<ReLU<float>>(), make<Linear<float>>(8, 3)});
  const TensorDataset data = test::class_blobs(global_batch() * batches_per_epoch, 3);
  const int n = world.size(), r = world.rank();
  DataLoader train(data, DistributedSampler(data.size(), n, r, true, 5), LoaderOptions{.batch_size = global_batch() / n});
  DataLoader val(data, DistributedSampler(data.size(), n, r, false), LoaderOptions{.batch_size = global_batch() / n});
  auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = lr});
  Trainer<Sequential<float>, DP> trainer(
      model, sgd, {.progress_bar = false, .print_epochs = false, .val_every_steps = val_every}, DP(world));
  (trainer.add_callback(callbacks), ...);
  const auto results = trainer.fit(train, &val, epochs);
  return {trainer.global_step(), results.size(), trainer.stopped_early()};
}

// Every rank's outcome equals rank 0's.
void check_alike(MpiComm& world, const Outcome& mine) {
  std::vector<double> values{double(mine.steps), double(mine.epochs), double(mine.stopped)}, rank0 = values;
  world.broadcast(std::span<double>(rank0), 0);
  BOOST_TEST(values == rank0, boost::test_tools::per_element());
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_stop_asked_by_the_last_rank_at_an_epoch_end_stops_every_rank) {
  MpiComm world(test::session());
  const int last = world.size() - 1;
  const Outcome o = fit(world, 0.1, 0, 5, StopOnOneRank{world.rank(), last, 2 * batches_per_epoch});
  BOOST_TEST(o.stopped);
  BOOST_TEST(o.epochs == 2u);
  BOOST_TEST(o.steps == 2 * batches_per_epoch);
  check_alike(world, o);
}

BOOST_AUTO_TEST_CASE(a_stop_asked_by_one_rank_inside_an_epoch_stops_every_rank_at_that_step) {
  MpiComm world(test::session());
  const Outcome o = fit(world, 0.1, 1, 5, StopOnOneRank{world.rank(), 1, batches_per_epoch + 2});
  BOOST_TEST(o.stopped);
  BOOST_TEST(o.epochs == 2u);  // the second epoch ends where the stop was agreed
  BOOST_TEST(o.steps == batches_per_epoch + 2);
  check_alike(world, o);
}

BOOST_AUTO_TEST_CASE(early_stopping_on_the_reduced_metric_stops_every_rank_alike) {
  MpiComm world(test::session());
  // Frozen weights: the validation loss never improves after the first check.
  const Outcome o = fit(world, 0.0, 0, 10, EarlyStopping({.monitor = {.name = "val_loss"}, .patience = 2}));
  BOOST_TEST(o.stopped);
  BOOST_TEST(o.epochs == 3u);
  check_alike(world, o);
}

BOOST_AUTO_TEST_CASE(model_checkpoint_keeps_its_files_once_whatever_the_world) {
  MpiComm world(test::session());
  const test::SharedDir dir(world, "ptrain_callback_top_k");
  const Outcome o = fit(world, 0.1, 2, 3,
                        ModelCheckpoint({.directory = dir.path, .monitor = {.name = "val_loss"}, .top_k = 2}));
  BOOST_TEST(o.steps == 3 * batches_per_epoch);
  world.barrier();
  const auto saved = checkpoint::list(dir.path);
  BOOST_TEST(saved.size() <= 3u);  // the two best and the newest (one may be both)
  BOOST_TEST(saved.back().first == 3 * batches_per_epoch);
  for (const auto& [step, path] : saved) BOOST_TEST(fs::exists(path / checkpoint::manifest_name));
}

BOOST_AUTO_TEST_SUITE_END()
