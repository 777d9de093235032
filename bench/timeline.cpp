// The timeline's cost (TrainerOptions::timeline), one process: epochs of the Fashion-MNIST
// SmallCnn (batch 64, random data, SGD) through DataParallel<SelfAllreduce> (so every gradient
// bucket is a span too), one Trainer without a timeline and one with (its file rewritten after each
// epoch, as fit does), taking turns epoch by epoch: PTRAIN_BENCH_REPEATS (default 7) epochs of 20
// steps each after one warm-up; medians of the step time. Then what the timeline costs when off:
// nanoseconds per TimelineSpan over a null timeline (the check every would-be span makes), times
// the spans of a step. Last, the preemption check (TrainerOptions' checkpoints with
// save_on_preemption, on by default): a third Trainer that saves checkpoints only on a signal
// (every_epochs = 0, so none is written) takes its turn with the other two; it reads the signal
// flag and agrees on it through DataParallel's reduce after every step. On one process that
// reduce is a no-op; under mpiexec it is an MPI_Allreduce of one double (bench/allreduce.cpp's
// bench=preemption_check gives its latency).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <ptrain/ptrain.hpp>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int steps = 20;

struct Batch {
  ptrain::Tensor<float> inputs;
  std::vector<std::int64_t> targets;
};
struct Loader {
  std::vector<Batch> batches;
  std::size_t size() const { return batches.size(); }
  void set_epoch(int) {}
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const char* env = std::getenv("PTRAIN_BENCH_REPEATS");
  const int repeats = env ? std::atoi(env) : 7;
  ptrain::Rng rng(1);
  Loader loader;
  for (int s = 0; s < steps; ++s) {
    Batch b{ptrain::Tensor<float>({64, 1, 28, 28}), {}};
    for (std::int64_t i = 0; i < b.inputs.numel(); ++i) b.inputs[i] = static_cast<float>(rng.normal());
    for (int i = 0; i < 64; ++i) b.targets.push_back(static_cast<std::int64_t>(rng.below(10)));
    loader.batches.push_back(std::move(b));
  }
  const auto trace = std::filesystem::temp_directory_path() / "ptrain_bench_timeline.json";
  ptrain::SelfComm self;
  using DP = ptrain::DataParallel<ptrain::SelfAllreduce>;
  using Net = ptrain::SmallCnn<float>;
  const auto checkpoints = std::filesystem::temp_directory_path() / "ptrain_bench_preemption";
  const auto make = [&](std::string timeline) {
    ptrain::manual_seed(3);
    auto net = std::make_shared<Net>();
    auto sgd = std::make_shared<ptrain::Sgd<float>>(net->parameters(), ptrain::SgdOptions{.lr = 0.01});
    return std::make_unique<ptrain::Trainer<Net, DP>>(
        net, sgd, ptrain::TrainerOptions{.progress_bar = false, .print_epochs = false, .timeline = timeline},
        DP(self, {.bucket_bytes = std::size_t{1} << 16}));
  };
  auto off = make(""), on = make(trace.string()), watched = make("");
  watched->save_checkpoints({.directory = checkpoints, .every_epochs = 0, .save_on_preemption = true});
  const auto epoch = [&](auto& trainer) {
    const auto start = Clock::now();
    trainer->fit(loader, 1);
    return std::chrono::duration<double>(Clock::now() - start).count() / steps;
  };
  epoch(off);
  epoch(on);
  epoch(watched);
  std::vector<double> t_off, t_on, t_watched;
  for (int r = 0; r < repeats; ++r) {
    t_off.push_back(epoch(off));
    t_on.push_back(epoch(on));
    t_watched.push_back(epoch(watched));
  }
  const double m_off = median(t_off), m_on = median(t_on);
  std::printf("bench=timeline model=small_cnn batch=64 threads=%d step_ms_off=%.3f step_ms_on=%.3f on_over_off=%.4f\n",
              ptrain::num_threads(), m_off * 1e3, m_on * 1e3, m_on / m_off);

  const double m_watched = median(t_watched);
  std::printf("bench=preemption_check model=small_cnn batch=64 ranks=1 step_ms_off=%.3f step_ms_watched=%.3f "
              "watched_over_off=%.4f\n",
              m_off * 1e3, m_watched * 1e3, m_watched / m_off);

  // Off: the null check of each would-be span.
  constexpr long spans = 100'000'000;
  ptrain::Timeline* volatile none = nullptr;
  const auto start = Clock::now();
  for (long i = 0; i < spans; ++i) {
    const ptrain::TimelineSpan span(none, ptrain::SpanKind::forward);
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / spans;
  std::printf("bench=timeline_off ns_per_span=%.3f spans_per_step_about=%d share_of_step=%.2e\n", ns, 16,
              16 * ns * 1e-9 / m_off);
  std::filesystem::remove(trace);
  std::filesystem::remove_all(checkpoints);
}
