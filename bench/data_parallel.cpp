// DataParallel's speed, under `mpiexec -n 2` (1 thread per rank):
//
// (a) bench=dp_sync: synchronising the CIFAR ResNet-18's gradients (62 tensors, 11,173,962
//     floats) through DataParallel's real path (every .grad filled, the gradient-ready hooks
//     fired in reverse registration order as backward fires them, then before_optimizer_step,
//     which leaves the averaged gradients in .grad) against one raw MPI_Allreduce of the same
//     bytes in one flat float buffer; Fp32, Fp16 and Bf16 on the wire. All cases take turns
//     within each repeat (PTRAIN_BENCH_REPEATS, default 15, after 3 warm-ups); each figure is
//     the median of the slowest rank's time. There is no backward to hide behind here: this is
//     the whole cost of the synchronisation (copies, casts, averaging and the reductions).
//
// (b) bench=weak_scaling: ResNet-18 training steps (Trainer, SGD with momentum, random data) at
//     batch 64 per rank. The 2-rank figure is DataParallel<MpiAllreduce, Fp32> with both ranks
//     training; the 1-rank figure is a plain Trainer on rank 0 while rank 1 sleeps (it polls a
//     non-blocking barrier every 2 ms, so it leaves rank 0 the machine; MPICH's blocking calls
//     would spin on a core). The two take turns step by step, so that they share the machine's
//     noise: PTRAIN_BENCH_STEPS timed steps (default 4) after one warm-up each.
//     efficiency = (2-rank images/s) / (2 x 1-rank images/s). A third case, both ranks training
//     at once without synchronising (impl=ptrain_independent), separates what the machine loses
//     to two busy processes (shared cores, memory bandwidth, other users' load) from what
//     DataParallel costs: efficiency_vs_independent = DataParallel images/s / independent's.
//
// PyTorch's DDP over gloo on the same work: bench/torch_ddp_peer.py; bench/run_data_parallel.sh
// runs both and prints the ratios.
//
// Under `mpiexec -n 1` it prints the 1-rank training figure alone (a cross-check of (b)).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <ptrain/mpi.hpp>

#include "mpi_timing.hpp"

namespace {

using namespace ptrain::bench;  // median, env_int, sleep_at_barrier, slowest

using Clock = std::chrono::steady_clock;
using Net = ptrain::ResNet<float, ptrain::BasicBlock>;

// PTRAIN_BENCH_BUCKET_KIB sets DataParallel's bucket size (default: DataParallel's own).
ptrain::DataParallelOptions bucket_options() {
  ptrain::DataParallelOptions options;
  if (const char* v = std::getenv("PTRAIN_BENCH_BUCKET_KIB")) options.bucket_bytes = std::strtoull(v, nullptr, 10) << 10;
  return options;
}

std::shared_ptr<Net> make_net() { return ptrain::resnet18<float>({.num_classes = 10, .cifar_stem = true}); }

// ---------------------------------------------------------------------------------------------
// (a) gradient synchronisation

struct SyncCase {
  std::string impl;
  std::size_t wire_bytes;
  std::size_t buckets;
  std::function<void()> reset;  // untimed, before each run
  std::function<void()> run;
  std::vector<double> seconds = {};
};

// One DataParallel on its own model (the hooks belong to the parameters), its gradients reset
// from the same values before every run.
template <class Compression>
struct DpSync {
  std::shared_ptr<Net> net = make_net();
  ptrain::DataParallel<ptrain::MpiAllreduce, Compression> dp;
  std::vector<ptrain::Var<float>> params;

  explicit DpSync(ptrain::MpiComm& world) : dp(world, bucket_options()) {
    dp.setup(*net);
    params = net->parameters();
  }
  void reset(const std::vector<float>& pristine) {
    std::size_t at = 0;
    for (auto& p : params) {
      ptrain::Tensor<float>& g = p.grad();
      if (!g.defined()) g = ptrain::Tensor<float>(p.shape());
      std::copy_n(pristine.begin() + static_cast<std::ptrdiff_t>(at), p.numel(), g.data());
      at += static_cast<std::size_t>(p.numel());
    }
  }
  // What backward and the Trainer do around an optimizer step.
  void run() {
    dp.before_backward(*net, true);
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      auto& node = *it->node();
      if (node.on_grad_ready) node.on_grad_ready(node);
    }
    dp.before_optimizer_step(*net);
  }
};

void bench_sync(ptrain::MpiSession& session, ptrain::MpiComm& world) {
  const MPI_Comm raw = session.world_handle();
  DpSync<ptrain::Fp32> fp32(world);
  DpSync<ptrain::Fp16> fp16(world);
  DpSync<ptrain::Bf16> bf16(world);
  const std::size_t tensors = fp32.params.size();
  std::size_t n = 0;
  for (auto& p : fp32.params) n += static_cast<std::size_t>(p.numel());

  std::vector<float> pristine(n), flat(n);
  ptrain::Rng rng(1234 + static_cast<std::uint64_t>(world.rank()));
  for (auto& g : pristine) g = static_cast<float>(rng.normal(0.0, 1e-2));

  std::vector<SyncCase> cases;
  cases.push_back({"raw_mpi_fp32", n * 4, 1, [&] { std::copy(pristine.begin(), pristine.end(), flat.begin()); },
                   [&] { MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, raw); }});
  cases.push_back({"data_parallel_fp32", n * 4, fp32.dp.bucket_count(), [&] { fp32.reset(pristine); },
                   [&] { fp32.run(); }});
  cases.push_back({"data_parallel_fp16", n * 2, fp16.dp.bucket_count(), [&] { fp16.reset(pristine); },
                   [&] { fp16.run(); }});
  cases.push_back({"data_parallel_bf16", n * 2, bf16.dp.bucket_count(), [&] { bf16.reset(pristine); },
                   [&] { bf16.run(); }});

  const int warmup = 3, repeats = env_int("PTRAIN_BENCH_REPEATS", 15);
  for (int i = 0; i < warmup + repeats; ++i)
    for (SyncCase& c : cases) {
      c.reset();
      MPI_Barrier(raw);
      const auto start = Clock::now();
      c.run();
      const double s = slowest(std::chrono::duration<double>(Clock::now() - start).count(), raw);
      if (i >= warmup) c.seconds.push_back(s);
    }

  // The averaged gradients must be the average: a benchmark of a wrong result is worthless.
  {
    fp32.reset(pristine);
    fp32.run();
    std::copy(pristine.begin(), pristine.end(), flat.begin());
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, raw);
    std::size_t at = 0;
    for (auto& p : fp32.params)
      for (std::int64_t k = 0; k < p.numel(); ++k, ++at)
        ptrain::check(std::abs(p.grad()[k] - flat[at] / world.size()) <= 1e-6f * (1 + std::abs(flat[at])),
                      "bench_data_parallel: DataParallel's averaged gradient differs from the raw allreduce at element ",
                      at);
  }

  if (world.rank() != 0) return;
  const double yardstick = median(cases[0].seconds), fp32_seconds = median(cases[1].seconds);
  for (const SyncCase& c : cases) {
    const double s = median(c.seconds);
    std::printf("bench=dp_sync impl=%s ranks=%d tensors=%zu elements=%zu wire_bytes=%zu buckets=%zu repeats=%d "
                "median_ms=%.3f ratio_to_raw=%.3f ratio_to_dp_fp32=%.3f\n",
                c.impl.c_str(), world.size(), tensors, n, c.wire_bytes, c.buckets, repeats, s * 1e3, s / yardstick,
                s / fp32_seconds);
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// (b) weak scaling

constexpr std::int64_t batch = 64;

struct RandomBatch {
  ptrain::Tensor<float> x{ptrain::Shape{batch, 3, 32, 32}};
  std::vector<std::int64_t> y = std::vector<std::int64_t>(batch);
  explicit RandomBatch(std::uint64_t seed) {
    ptrain::Rng rng(seed);
    for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
    for (auto& t : y) t = static_cast<std::int64_t>(rng.below(10));
  }
};

template <class... Policies>
auto make_trainer(std::shared_ptr<Net> net, Policies... policies) {
  auto sgd = std::make_shared<ptrain::Sgd<float>>(net->parameters(), ptrain::SgdOptions{.lr = 0.01, .momentum = 0.9});
  return std::make_unique<ptrain::Trainer<Net, Policies...>>(
      net, sgd, ptrain::TrainerOptions{.progress_bar = false, .print_epochs = false}, std::move(policies)...);
}

template <class Step>
double time_step(Step&& step) {
  const auto start = Clock::now();
  step();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void bench_weak_scaling(ptrain::MpiSession& session, ptrain::MpiComm& world) {
  const MPI_Comm raw = session.world_handle();
  const int warmup = 1, steps = env_int("PTRAIN_BENCH_STEPS", 4);
  const RandomBatch data(99 + static_cast<std::uint64_t>(world.rank()));
  ptrain::manual_seed(0);
  auto alone = make_trainer(make_net());  // rank 0's 1-rank run, no policy
  auto parallel = make_trainer(make_net(), ptrain::DataParallel<ptrain::MpiAllreduce, ptrain::Fp32>(world));

  auto independent = make_trainer(make_net());  // both ranks at once, no synchronisation

  std::vector<double> alone_seconds, independent_seconds, parallel_seconds;
  for (int i = 0; i < warmup + steps; ++i) {
    // 1 rank: rank 0 trains alone, rank 1 sleeps.
    sleep_at_barrier(raw);
    double s = 0;
    if (world.rank() == 0) s = time_step([&] { alone->train_step(data.x, data.y); });
    sleep_at_barrier(raw);
    if (i >= warmup) alone_seconds.push_back(s);
    // 2 ranks, each training on its own: what the machine allows two processes at once.
    MPI_Barrier(raw);
    s = slowest(time_step([&] { independent->train_step(data.x, data.y); }), raw);
    if (i >= warmup) independent_seconds.push_back(s);
    // 2 ranks: both train data-parallel.
    MPI_Barrier(raw);
    s = slowest(time_step([&] { parallel->train_step(data.x, data.y); }), raw);
    if (i >= warmup) parallel_seconds.push_back(s);
  }
  if (world.rank() == 0) {
    const double one_rank_images_per_sec = batch / median(alone_seconds);
    const double two_rank_images_per_sec = world.size() * batch / median(parallel_seconds);
    std::printf("bench=weak_scaling impl=ptrain ranks=1 threads=1 batch_per_rank=%lld steps=%d median_ms=%.1f "
                "images_per_sec=%.2f\n",
                static_cast<long long>(batch), steps, 1e3 * median(alone_seconds), one_rank_images_per_sec);
    const double independent_images_per_sec = world.size() * batch / median(independent_seconds);
    std::printf("bench=weak_scaling impl=ptrain_independent ranks=%d threads=1 batch_per_rank=%lld steps=%d "
                "median_ms=%.1f images_per_sec=%.2f efficiency=%.3f\n",
                world.size(), static_cast<long long>(batch), steps, 1e3 * median(independent_seconds),
                independent_images_per_sec, independent_images_per_sec / (world.size() * one_rank_images_per_sec));
    std::printf("bench=weak_scaling impl=ptrain_data_parallel_fp32 ranks=%d threads=1 batch_per_rank=%lld steps=%d "
                "median_ms=%.1f images_per_sec=%.2f efficiency=%.3f efficiency_vs_independent=%.3f\n",
                world.size(), static_cast<long long>(batch), steps, 1e3 * median(parallel_seconds),
                two_rank_images_per_sec, two_rank_images_per_sec / (world.size() * one_rank_images_per_sec),
                two_rank_images_per_sec / independent_images_per_sec);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::set_num_threads(1);
    ptrain::MpiComm world(session);
    if (world.size() == 1) {
      // The 1-rank figure alone, as a process by itself.
      const int steps = env_int("PTRAIN_BENCH_STEPS", 4);
      const RandomBatch data(99);
      ptrain::manual_seed(0);
      auto alone = make_trainer(make_net());
      std::vector<double> seconds;
      for (int i = 0; i < 1 + steps; ++i) {
        const double s = time_step([&] { alone->train_step(data.x, data.y); });
        if (i >= 1) seconds.push_back(s);
      }
      std::printf("bench=weak_scaling impl=ptrain_alone ranks=1 threads=1 batch_per_rank=%lld steps=%d median_ms=%.1f "
                  "images_per_sec=%.2f\n",
                  static_cast<long long>(batch), steps, 1e3 * median(seconds), batch / median(seconds));
      return;
    }
    const std::string only = argc > 1 ? argv[1] : "sync,weak";
    if (only.find("sync") != std::string::npos) bench_sync(session, world);
    if (only.find("weak") != std::string::npos) bench_weak_scaling(session, world);
  });
}
