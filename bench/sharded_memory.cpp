// ZeRO's memory, measured: under `mpiexec -n N` (N = 1, 2, 4, 8, 16; bench/run_sharded_memory.sh
// runs them all), a bf16 MLP of 80 linear layers of 512 x 512 (21,012,480 parameters) trains with
// MixedPrecision<Bf16> and Adam on its fp32 masters under DataParallel, Sharded<Zero1>,
// Sharded<Zero2> and Sharded<Zero3>, on random data (32 rows per rank). Sharded partitions whole
// parameters (detail/optimizer_shards.hpp), so 80 equal layers give each of up to 16 ranks the
// same share (20 layers of 1024 x 1024 left 8 and 16 ranks 3 layers against 2.5, 2 against 1.25).
//
// Each rank counts, at the peak of a step, the live bytes of the model's parameters, their
// gradients and the optimizer state (the fp32 masters and Adam's two moments), each tensor's
// allocation as Cpu's allocator counts it, each counted once (tensor/storage_census.hpp: a
// DataParallel gradient viewing its bucket counts the bucket's bytes). The peak is the largest of the samples a
// probe policy, listed last, takes at its before_optimizer_step (the gradients reduced, the masters'
// gradients unscaled, the previous steps' Adam state there) and after_optimizer_step (which the
// Trainer calls first: the optimizer has just stepped; nothing gathered yet) over two steps, each
// mode alone in the process (so that live_bytes below is its own).
// One line per (mode, N, rank), next to ZeRO's formula for mixed-precision Adam (Ψ parameters):
//   DataParallel 16Ψ, Zero1 4Ψ + 12Ψ/N, Zero2 2Ψ + 14Ψ/N, Zero3 16Ψ/N.
// ratio = measured / formula. Also printed, outside the formula: the fp32 copies of the gradients
// the optimizer reads (master_grad_bytes: ZeRO's paper counts them among temporary buffers;
// MixedPrecision makes them for the masters a rank keeps: 4Ψ, or 4Ψ/N sharded), everything Cpu's
// allocator holds then (live_bytes: activations, buffers and the batch too), and the most it held
// at any moment of the two steps (peak_live_bytes: also, under DataParallel, the gradients
// backward made beside the buckets they are copied into, until the reduction is unpacked).
//
// Throughput: the four modes then take turns step by step (sharing the machine's noise); the
// median step time (slowest rank) of PTRAIN_BENCH_STEPS timed steps (default 5) after one
// warm-up, as samples/s of the global batch, and its ratio to DataParallel's at the same N.
// PTRAIN_BENCH_STEPS=0 leaves throughput out (samples_per_sec=0: the script's 8 and 16 ranks,
// oversubscribed, where it would say nothing).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ptrain/mpi.hpp>

namespace {

using ptrain::bfloat16;
using Net = ptrain::Sequential<bfloat16>;
using Amp = ptrain::MixedPrecision<ptrain::Bf16>;
using Clock = std::chrono::steady_clock;

constexpr int layers = 80;
constexpr std::int64_t width = 512, rows_per_rank = 32;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::max(0, std::atoi(v)) : fallback;
}

std::shared_ptr<Net> make_net() {
  ptrain::manual_seed(1);
  auto net = std::make_shared<Net>();
  for (int layer = 0; layer < layers; ++layer) {
    net->push_back(ptrain::make<ptrain::Linear<bfloat16>>(width, width));
    net->push_back(ptrain::make<ptrain::ReLU<bfloat16>>());
  }
  return net;
}

// The live bytes of each kind of training state on this rank.
struct Census {
  std::int64_t params = 0, grads = 0, masters = 0, moments = 0, master_grads = 0, live = 0;
  std::int64_t peak_live = 0;  // Cpu's high-water mark over the steps
  std::int64_t optimizer() const { return masters + moments; }
  std::int64_t total() const { return params + grads + optimizer(); }
};

Census take_census(const Net& net, const Amp& amp, const ptrain::Adam<float>& adam) {
  ptrain::StorageCensus census;
  Census c;
  for (const auto& p : net.parameters()) c.params += census.count(p.value());
  for (const auto& p : net.parameters()) c.grads += census.count(p.grad());
  for (const auto& m : amp.master_parameters()) c.masters += census.count(m.value());
  // On the CPU state() hands over the moments themselves (the step counts are made for it).
  for (const auto& [key, t] : adam.state().tensors)
    if (!key.ends_with(".step")) c.moments += census.count(t);
  for (const auto& m : amp.master_parameters()) c.master_grads += census.count(m.grad());
  c.live = ptrain::Cpu::live_bytes();
  return c;
}

// A policy listed last: its before_optimizer_step runs after every other's, its after_optimizer_step
// first (the Trainer unwinds that point), right after the optimizer's step.
struct PeakProbe {
  std::function<void()> sample;
  bool before_optimizer_step(ptrain::Module<bfloat16>&) {
    sample();
    return true;
  }
  void after_optimizer_step(ptrain::Module<bfloat16>&) { sample(); }
};

// One mode's model, fp32 masters, Adam and Trainer, and the census at the peak of its steps so far.
template <class Parallel>
struct Training {
  std::shared_ptr<Net> net = make_net();
  Amp amp{*net};
  std::shared_ptr<ptrain::Adam<float>> adam =
      std::make_shared<ptrain::Adam<float>>(amp.master_parameters(), ptrain::AdamOptions{.lr = 1e-4});
  Census peak;
  ptrain::Trainer<Net, Parallel, Amp, PeakProbe> trainer;

  explicit Training(Parallel parallel)
      : trainer(net, adam, {.progress_bar = false, .print_epochs = false}, std::move(parallel), amp,
                PeakProbe{[this] {
                  const Census c = take_census(*net, amp, *adam);
                  if (c.total() > peak.total()) peak = c;
                }}) {}
  Training(const Training&) = delete;
  Training& operator=(const Training&) = delete;
};

// This rank's batch: random rows and classes.
struct Batch {
  ptrain::Tensor<bfloat16> x;
  std::vector<std::int64_t> y;
};
Batch make_batch(int rank) {
  ptrain::Rng rng(7 + static_cast<std::uint64_t>(rank));
  Batch b{ptrain::Tensor<bfloat16>({rows_per_rank, width}), {}};
  for (std::int64_t i = 0; i < b.x.numel(); ++i) b.x[i] = static_cast<bfloat16>(rng.normal());
  for (std::int64_t i = 0; i < rows_per_rank; ++i) b.y.push_back(static_cast<std::int64_t>(rng.below(width)));
  return b;
}

// The census at the peak of two steps (the second has the first's Adam state), one mode alone in
// the process, so that live_bytes is its own.
template <class Parallel>
Census peak_of(Parallel parallel, const Batch& batch) {
  Training<Parallel> t(std::move(parallel));
  ptrain::Cpu::reset_peak_live_bytes();
  for (int step = 0; step < 2; ++step) t.trainer.train_step(batch.x, batch.y);
  Census peak = t.peak;
  peak.peak_live = ptrain::Cpu::peak_live_bytes();
  return peak;
}

// ZeRO's bytes per rank for mixed-precision Adam: 2Ψ weights + 2Ψ gradients + 12Ψ optimizer state,
// the parts each stage shards divided by N.
double formula_bytes(const std::string& mode, double psi, double n) {
  if (mode == "data_parallel") return 16 * psi;
  if (mode == "zero1") return 4 * psi + 12 * psi / n;
  if (mode == "zero2") return 2 * psi + 14 * psi / n;
  return 16 * psi / n;
}
const char* formula_text(const std::string& mode) {
  if (mode == "data_parallel") return "16P";
  if (mode == "zero1") return "4P+12P/N";
  if (mode == "zero2") return "2P+14P/N";
  return "16P/N";
}

}  // namespace

int main(int argc, char** argv) {
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    using DataParallel = ptrain::DataParallel<ptrain::MpiAllreduce>;
    using Zero1 = ptrain::Sharded<ptrain::Zero1>;
    using Zero2 = ptrain::Sharded<ptrain::Zero2>;
    using Zero3 = ptrain::Sharded<ptrain::Zero3>;
    const int steps = env_int("PTRAIN_BENCH_STEPS", 5);
    const auto psi = static_cast<double>(make_net()->parameter_count());
    const int n = world.size();
    const Batch batch = make_batch(world.rank());
    const std::vector<std::string> modes{"data_parallel", "zero1", "zero2", "zero3"};

    // Memory: each mode alone.
    const std::vector<Census> peaks{peak_of(DataParallel(world), batch), peak_of(Zero1(world), batch),
                                    peak_of(Zero2(world), batch), peak_of(Zero3(world), batch)};

    // Throughput: the four take turns step by step, so that they share the machine's noise.
    std::vector<double> rate(modes.size(), 0.0);
    if (steps > 0) {
      auto dp = std::make_unique<Training<DataParallel>>(DataParallel(world));
      auto z1 = std::make_unique<Training<Zero1>>(Zero1(world));
      auto z2 = std::make_unique<Training<Zero2>>(Zero2(world));
      auto z3 = std::make_unique<Training<Zero3>>(Zero3(world));
      const std::vector<std::function<void()>> step_of{[&] { dp->trainer.train_step(batch.x, batch.y); },
                                                       [&] { z1->trainer.train_step(batch.x, batch.y); },
                                                       [&] { z2->trainer.train_step(batch.x, batch.y); },
                                                       [&] { z3->trainer.train_step(batch.x, batch.y); }};
      std::vector<std::vector<double>> seconds(modes.size());
      for (int step = 0; step <= steps; ++step)
        for (std::size_t m = 0; m < modes.size(); ++m) {
          world.barrier();
          const auto start = Clock::now();
          step_of[m]();
          const double mine = std::chrono::duration<double>(Clock::now() - start).count();
          double slowest = 0;
          MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, world.handle());
          if (step > 0) seconds[m].push_back(slowest);  // step 0 warms up
        }
      for (std::size_t m = 0; m < modes.size(); ++m) {
        std::sort(seconds[m].begin(), seconds[m].end());
        rate[m] = static_cast<double>(rows_per_rank * n) / seconds[m][seconds[m].size() / 2];
      }
    }

    for (std::size_t m = 0; m < modes.size(); ++m) {
      const Census& c = peaks[m];
      const double formula = formula_bytes(modes[m], psi, n);
      const double ratio = static_cast<double>(c.total()) / formula;
      for (int rank = 0; rank < n; ++rank) {  // ranks in order, one line each
        world.barrier();
        if (rank != world.rank()) continue;
        std::printf(
            "bench=sharded_memory mode=%s ranks=%d rank=%d parameters=%.0f params_bytes=%lld grads_bytes=%lld "
            "optimizer_bytes=%lld masters_bytes=%lld moments_bytes=%lld total_bytes=%lld formula=%s "
            "formula_bytes=%.0f ratio=%.4f within_10pct=%s master_grad_bytes=%lld live_bytes=%lld peak_live_bytes=%lld "
            "samples_per_sec=%.2f vs_data_parallel=%.3f\n",
            modes[m].c_str(), n, rank, psi, static_cast<long long>(c.params), static_cast<long long>(c.grads),
            static_cast<long long>(c.optimizer()), static_cast<long long>(c.masters),
            static_cast<long long>(c.moments), static_cast<long long>(c.total()), formula_text(modes[m]), formula,
            ratio, std::abs(ratio - 1) <= 0.1 ? "yes" : "no", static_cast<long long>(c.master_grads),
            static_cast<long long>(c.live), static_cast<long long>(c.peak_live), rate[m],
            rate[0] > 0 ? rate[m] / rate[0] : 0.0);
        std::fflush(stdout);
      }
    }
  });
}
