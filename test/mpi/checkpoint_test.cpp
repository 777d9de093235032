// Checkpoints under mpiexec -n 2, 3 and 4: DataParallel over the world, Pipeline with one stage
// per rank, a data x pipeline grid (2 x 2 under -n 4) and MixedPrecision<Fp16> beside
// DataParallel, stopped by SIGUSR1 on one rank only at 1.5 epochs (every rank saves and fit
// returns on every rank), then resumed in fresh Trainers, end with the 2-epoch run's weights,
// epoch losses (and loss scale) bit for bit. A data-parallel checkpoint of 2 ranks resumes on 1,
// whose checkpoint resumes on the whole world (2 -> 1 -> 3 under -n 3), training on to the last
// step; the world's resumes on half of it, whose resumes on 3 (16 -> 8 -> 3 under -n 16).
#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/blobs.hpp"
#include "mpi_test_main.hpp"
#include "shared_dir.hpp"

using namespace ptrain;
using test::SharedDir;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(checkpoint_test)

namespace {

constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};
constexpr std::int64_t batches_per_epoch = 6, stop_step = 9;
// 12 rows on up to 4 ranks; past them 3 rows a rank (48 under -n 16: 6 a rank on 8, 16 on 3).
std::int64_t global_batch() { return test::global_batch_for(12, 3); }
using DP = DataParallel<MpiAllreduce>;

TensorDataset blobs() { return test::class_blobs(global_batch() * batches_per_epoch, 3); }

// With batch norm: its running statistics (float in the half model) are part of what must resume.
template <class T = float>
std::shared_ptr<Sequential<T>> make_net(std::uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<Sequential<T>>(std::initializer_list<std::shared_ptr<Module<T>>>{
      make<Linear<T>>(4, 8), make<BatchNorm2d<T>>(8), make<ReLU<T>>(), make<Linear<T>>(8, 8), make<ReLU<T>>(),
      make<Linear<T>>(8, 3)});
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> weights;  // this rank's part, parameters and buffers
  std::int64_t steps = 0;
  std::vector<double> loss_scales;  // MixedPrecision's, after each step of this fit
  bool preempted = false;
};

// Trains to 2 epochs with the policies (DP over comm, or a Pipeline); `signal_rank` raises SIGUSR1
// at `stop_at` on that rank alone; `resume` first loads the latest checkpoint under dir. T = half
// adds MixedPrecision<Fp16> after the policies, its scale starting high enough to overflow and
// moving every few steps, so that a resume must restore the scaler's state to stay bit-identical.
template <class T = float, class... Policies>
Run train(const fs::path& dir, int replicas, int replica, std::int64_t stop_at, int signal_rank, int my_rank,
          bool resume, Policies... policies) {
  auto model = make_net<T>(resume ? 99 : 1);
  const TensorDataset data = blobs();
  DataLoader loader(data, DistributedSampler(data.size(), replicas, replica, true, 5),
                    LoaderOptions{.batch_size = global_batch() / replicas});
  Run run;
  const auto fit = [&](auto& trainer, auto after_step) {
    trainer.on_step_end([&](std::int64_t step) {
      after_step(trainer);
      if (step == stop_at && my_rank == signal_rank) std::raise(SIGUSR1);
    });
    trainer.save_checkpoints({.directory = dir, .keep_last = 3});
    if (resume) BOOST_REQUIRE(trainer.resume_latest(dir));
    for (const auto& r : trainer.fit(loader, 2)) run.losses.push_back(r.train_loss);
    for (auto& [name, p] : trainer.local_model().named_parameters())
      for (const T v : p.value().to_vector()) run.weights[name].push_back(static_cast<float>(v));
    for (auto& [name, b] : trainer.local_model().named_buffers())
      for (const T v : b->to_vector()) run.weights[name].push_back(static_cast<float>(v));
    for (auto& [name, p] : trainer.local_model().named_float_parameters()) run.weights[name] = p.value().to_vector();
    for (auto& [name, b] : trainer.local_model().named_float_buffers()) run.weights[name] = b->to_vector();
    run.steps = trainer.global_step();
    run.preempted = trainer.preempted();
  };
  if constexpr (std::is_same_v<T, float>) {
    auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9});
    Trainer<Sequential<T>, Policies...> trainer(model, sgd, quiet, policies...);
    fit(trainer, [](auto&) {});
  } else {
    using Amp = MixedPrecision<Fp16>;
    Amp amp(*model, {.initial_scale = 1 << 18, .scale_window = 3});
    auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9});
    Trainer<Sequential<T>, Policies..., Amp> trainer(model, sgd, quiet, policies..., amp);
    fit(trainer, [&](auto& t) { run.loss_scales.push_back(t.template policy<Amp>().loss_scale()); });
  }
  return run;
}

void check_same(const Run& reference, const Run& stopped, const Run& resumed) {
  BOOST_TEST(stopped.preempted, "every rank stops when one rank gets the signal");
  BOOST_REQUIRE_EQUAL(stopped.losses.size(), 1u);
  BOOST_REQUIRE_EQUAL(reference.losses.size(), 2u);
  BOOST_REQUIRE_EQUAL(resumed.losses.size(), 1u);
  BOOST_TEST(stopped.steps == stop_step);
  BOOST_TEST(stopped.losses[0] == reference.losses[0]);
  BOOST_TEST(resumed.losses[0] == reference.losses[1]);
  BOOST_TEST(resumed.weights.size() == reference.weights.size());
  BOOST_TEST((resumed.weights == reference.weights), "the resumed run's weights differ from the whole run's");
}

// A resumed run that trained on to the last step, its last epoch's loss finite, every rank of comm
// with rank 0's weights.
void check_finished_alike(MpiComm& comm, const Run& run, const std::string& what) {
  BOOST_TEST(!run.preempted);
  BOOST_TEST(run.steps == 2 * batches_per_epoch);
  BOOST_REQUIRE_EQUAL(run.losses.size(), 1u);
  BOOST_TEST(std::isfinite(run.losses[0]));
  std::vector<float> mine;
  for (const auto& [name, w] : run.weights) mine.insert(mine.end(), w.begin(), w.end());
  std::vector<float> rank0 = mine;
  comm.broadcast(std::span<float>(rank0), 0);
  BOOST_TEST((mine == rank0), "the ranks' weights differ after " << what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(data_parallel_resumes_bit_identically_after_a_signal_to_one_rank) {
  MpiComm world(test::session());
  const SharedDir whole(world, "ptrain_ckpt_dp_whole"), cut(world, "ptrain_ckpt_dp_cut");
  const int n = world.size(), r = world.rank();
  const Run reference = train(whole.path, n, r, 0, -1, r, false, DP(world));
  const Run stopped = train(cut.path, n, r, stop_step, n - 1, r, false, DP(world));
  const Run resumed = train(cut.path, n, r, 0, -1, r, true, DP(world));
  check_same(reference, stopped, resumed);
  BOOST_TEST(!resumed.weights.empty());
  const fs::path saved = cut.path / ("step-" + std::to_string(stop_step));
  BOOST_TEST(fs::exists(saved / ("rank-" + std::to_string(n - 1) + ".txt")));
  BOOST_TEST(fs::exists(saved / "model.safetensors"));  // one part, written by replica 0
}

BOOST_AUTO_TEST_CASE(a_pipeline_resumes_bit_identically_with_one_part_per_stage) {
  MpiComm world(test::session());
  const SharedDir whole(world, "ptrain_ckpt_pipe_whole"), cut(world, "ptrain_ckpt_pipe_cut");
  const int r = world.rank();
  using P = Pipeline<4>;
  const auto pipeline = [&] { return P(world, {.print_plan = false}); };
  const Run reference = train(whole.path, 1, 0, 0, -1, r, false, pipeline());
  const Run stopped = train(cut.path, 1, 0, stop_step, 0, r, false, pipeline());
  const Run resumed = train(cut.path, 1, 0, 0, -1, r, true, pipeline());
  check_same(reference, stopped, resumed);
  const std::string part = "model.part-" + std::to_string(r) + "-of-" + std::to_string(world.size()) + ".safetensors";
  BOOST_TEST(fs::exists(cut.path / ("step-" + std::to_string(stop_step)) / part), part);
}

// stages x replicas: 2 x 2 under -n 4 (and 2 x 1 under -n 2, 3 x 1 under -n 3); the last rank
// of the world gets the signal.
BOOST_AUTO_TEST_CASE(a_data_by_pipeline_grid_resumes_bit_identically) {
  MpiComm world(test::session());
  const SharedDir whole(world, "ptrain_ckpt_grid_whole"), cut(world, "ptrain_ckpt_grid_cut");
  const int n = world.size(), r = world.rank(), stages = n % 2 == 0 ? 2 : n;
  using P = Pipeline<2>;
  const auto pipeline = [&] { return P(world, {.stages = stages, .print_plan = false}); };
  const PipelineGrid grid{.stages = stages, .replicas = n / stages};
  const int replicas = grid.replicas, replica = grid.replica_of(r);
  const Run reference = train(whole.path, replicas, replica, 0, -1, r, false, DP(world), pipeline());
  const Run stopped = train(cut.path, replicas, replica, stop_step, n - 1, r, false, DP(world), pipeline());
  const Run resumed = train(cut.path, replicas, replica, 0, -1, r, true, DP(world), pipeline());
  check_same(reference, stopped, resumed);
}

BOOST_AUTO_TEST_CASE(mixed_precision_beside_data_parallel_resumes_its_loss_scale_bit_identically) {
  MpiComm world(test::session());
  const SharedDir whole(world, "ptrain_ckpt_amp_whole"), cut(world, "ptrain_ckpt_amp_cut");
  const int n = world.size(), r = world.rank();
  const Run reference = train<half>(whole.path, n, r, 0, -1, r, false, DP(world));
  const Run stopped = train<half>(cut.path, n, r, stop_step, 0, r, false, DP(world));
  const Run resumed = train<half>(cut.path, n, r, 0, -1, r, true, DP(world));
  check_same(reference, stopped, resumed);
  BOOST_TEST(!resumed.weights.empty());
  // The scale after each step: the resumed run's (steps 10 to 12) go on from where the stopped one
  // left it, as in the whole run.
  BOOST_REQUIRE_EQUAL(reference.loss_scales.size(), std::size_t{2 * batches_per_epoch});
  BOOST_TEST(std::set<double>(reference.loss_scales.begin(), reference.loss_scales.end()).size() > 1,
             "the scale never moved: the test would not see it restored");
  const std::vector<double> rest(reference.loss_scales.begin() + stop_step, reference.loss_scales.end());
  BOOST_TEST(resumed.loss_scales == rest, boost::test_tools::per_element());
}

// 2 ranks -> 1 -> the world: the data order changes (each rank's shard), so no bit-for-bit
// comparison; the step count carries over and every rank ends with the same weights.
BOOST_AUTO_TEST_CASE(a_data_parallel_checkpoint_resumes_on_another_world_size) {
  MpiComm world(test::session());
  const SharedDir dir(world, "ptrain_ckpt_worlds");
  const int r = world.rank();
  {
    MpiComm pair = world.split(r < 2 ? 0 : 1, r);
    if (r < 2) {
      const Run two = train(dir.path, 2, r, stop_step, 0, r, false, DP(pair));
      BOOST_TEST(two.preempted);
      BOOST_TEST(two.steps == stop_step);
    }
  }
  world.barrier();
  if (r == 0) {
    const Run one = train(dir.path, 1, 0, stop_step + 1, 0, r, true);
    BOOST_TEST(one.preempted);
    BOOST_TEST(one.steps == stop_step + 1);
  }
  world.barrier();
  check_finished_alike(world, train(dir.path, world.size(), r, 0, -1, r, true, DP(world)),
                       "resuming on another world size");
}

// The whole world's checkpoint (under -n 16: 16 ranks) resumes on half of it (8), whose checkpoint
// resumes on 3 ranks, training on to the last step: the step count carries over and the 3 ranks
// end with the same weights.
BOOST_AUTO_TEST_CASE(a_checkpoint_of_the_world_resumes_on_half_of_it_then_on_three) {
  MpiComm world(test::session());
  const SharedDir dir(world, "ptrain_ckpt_halves");
  const int n = world.size(), r = world.rank(), half = std::max(1, n / 2), three = std::min(n, 3);
  const Run whole = train(dir.path, n, r, stop_step - 2, n - 1, r, false, DP(world));
  BOOST_TEST(whole.preempted);
  BOOST_TEST(whole.steps == stop_step - 2);
  world.barrier();
  {
    MpiComm halves = world.split(r < half ? 0 : 1, r);
    if (r < half) {
      const Run part = train(dir.path, half, r, stop_step, half - 1, r, true, DP(halves));
      BOOST_TEST(part.preempted);
      BOOST_TEST(part.steps == stop_step);
    }
  }
  world.barrier();
  MpiComm trio = world.split(r < three ? 0 : 1, r);
  if (r >= three) return;
  check_finished_alike(trio, train(dir.path, three, r, 0, -1, r, true, DP(trio)), "resuming from half the world");
}

BOOST_AUTO_TEST_SUITE_END()
