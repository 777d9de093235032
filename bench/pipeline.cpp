// Pipeline bubble and throughput: run under `mpiexec -n S` (S stages, one thread each).
//   bench_pipeline [tower]  a tower of equal 3x3 convolutions on 32x32 images, so that balancing by
//                           parameters balances the work (batch 64)
//   bench_pipeline lm       the transformer tutorial's TransformerLM (emsize 256, nhid 1024, 4
//                           layers, 8 heads, vocabulary 28,782, bptt 35, batch 20; dropout 0.2),
//                           batch-first, cut between its layers
//   bench_pipeline lm12     the same with the tutorial's 12 layers, deep enough for two stages of
//                           near-equal work
// For M = 1, 2, 4, 8, 16 micro-batches and both schedules it prints, per stage, the measured
// idle fraction (time blocked on the neighbour / step time) next to the bound (S-1)/(M+S-1), and
// samples/s against the unpipelined run of the same model and batch on one rank and one thread.
// That bound holds for stages of equal work. For the stages as cut it also prints the bound their
// measured work allows: with busy_s = stage s's step time less its waits, a schedule that only
// fills and drains takes T = ((M-1) max_s busy_s + sum_s busy_s) / M per step, and stage s idles
// 1 - busy_s / T of it (cut_bound_stageN; equal busy_s give (S-1)/(M+S-1) again). step_over_cut_bound
// = the measured step / T: how far the schedule is from that bound.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/mpi.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>

namespace {

using namespace ptrain;
using Clock = std::chrono::steady_clock;

struct Tower {
  static constexpr const char* name = "tower";
  using Model = Sequential<float>;
  using Task = Classification;
  static constexpr std::int64_t batch = 64, width = 32, side = 32;
  static constexpr int depth = 6;
  Tensor<float> inputs{Shape{batch, 3, side, side}};
  std::vector<std::int64_t> targets;

  Tower() {
    Rng rng(5);
    for (std::int64_t i = 0; i < inputs.numel(); ++i) inputs[i] = static_cast<float>(rng.normal());
    for (std::int64_t i = 0; i < batch; ++i) targets.push_back(static_cast<std::int64_t>(rng.below(10)));
  }
  static std::shared_ptr<Model> model() {
    manual_seed(1);
    Conv2dOptions same;
    same.pad_h = same.pad_w = 1;
    auto net = std::make_shared<Sequential<float>>();
    net->push_back(make<Conv2d<float>>(3, width, 3, same));
    for (int i = 0; i < depth; ++i) {
      net->push_back(make<ReLU<float>>());
      net->push_back(make<Conv2d<float>>(width, width, 3, same));
    }
    net->push_back(make<AdaptiveAvgPool2d<float>>(1));
    net->push_back(make<Flatten<float>>());
    net->push_back(make<Linear<float>>(width, 10));
    return net;
  }
  static std::vector<std::size_t> cut_points(int /*stages*/) { return {}; }  // balanced by parameters
};

// layers: 4, the benchmarked tutorial model, or 12, the tutorial's own depth.
template <int Layers>
struct Lm {
  static constexpr const char* name = Layers == 4 ? "transformer_lm" : "transformer_lm_12";
  using Model = TransformerLM<float>;
  using Task = SequenceModelling;
  static constexpr std::int64_t batch = 20, bptt = 35, ntoken = 28782;
  Tensor<float> inputs{Shape{batch, bptt}};
  Tensor<std::int64_t> targets{Shape{batch, bptt}};

  Lm() {
    Rng rng(5);
    for (std::int64_t i = 0; i < inputs.numel(); ++i) inputs[i] = static_cast<float>(rng.below(ntoken));
    for (std::int64_t i = 0; i < targets.numel(); ++i) targets[i] = static_cast<std::int64_t>(rng.below(ntoken));
  }
  static std::shared_ptr<Model> model() {
    manual_seed(1);
    return std::make_shared<Model>(TransformerLMOptions{
        .ntoken = ntoken, .ninp = 256, .nhead = 8, .nhid = 1024, .nlayers = Layers, .dropout = 0.2, .batch_first = true});
  }
  // Cut by work, not parameters. Per step (700 tokens, forward and backward) the decoder's products
  // over 28,782 words cost about 31 GFLOP, a layer about 3.3, the embedding (as large as the
  // decoder) nearly nothing. Layer i is at index i + 2 (after encoder and pos_encoder); the decoder last.
  // 4 layers: encoder..layer 3 | decoder, the best two-stage cut, 13 against 31 GFLOP.
  // 12 layers: encoder..layer 9 | layers 10, 11, decoder: 33 against 38 GFLOP, even in time at 4 to
  // 8 micro-batches, where a layer's small products (35 to 70 rows) lose more speed than the decoder's.
  // More stages: balanced by parameters.
  static std::vector<std::size_t> cut_points(int stages) {
    if (stages != 2) return {};
    return {Layers == 4 ? std::size_t{6} : std::size_t{12}};
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int steps() {
  const char* s = std::getenv("PTRAIN_BENCH_STEPS");
  return s ? std::max(1, std::atoi(s)) : 6;
}

template <class Work, class... Policies>
auto make_trainer(Policies... policies) {
  auto net = Work::model();
  auto sgd = std::make_shared<Sgd<float>>(net->parameters(), SgdOptions{.lr = 0.01, .momentum = 0.9});
  return std::make_unique<Trainer<typename Work::Model, Policies..., typename Work::Task>>(
      net, sgd, TrainerOptions{.progress_bar = false, .print_epochs = false}, policies..., typename Work::Task{});
}

template <int M, class Schedule, class Work>
void run_pipeline(MpiComm& world, const Work& data, double serial_samples_per_sec) {
  using P = Pipeline<M, Schedule>;
  auto trainer = make_trainer<Work>(P(world, {.cut_points = Work::cut_points(world.size()),
                                              .print_plan = M == 1 && std::is_same_v<Schedule, GPipe>}));
  std::vector<double> seconds, idle, busy;
  for (int s = 0; s <= steps(); ++s) {
    world.barrier();
    const auto start = Clock::now();
    trainer->train_step(data.inputs, data.targets);
    if (s == 0) continue;
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    const auto& stats = trainer->template policy<P>().last_step();
    idle.push_back(stats.wait_seconds / stats.step_seconds);
    busy.push_back(stats.step_seconds - stats.wait_seconds);
  }
  // Every stage's idle fraction and busy time come to rank 0, which prints.
  std::vector<double> mine{median(idle), median(busy)}, all(2 * static_cast<std::size_t>(world.size()));
  world.allgather(mine, all);
  const double step = median(seconds), S = world.size();
  if (world.rank() != 0) return;
  double busiest = 0, total_busy = 0;
  for (std::size_t s = 0; s < all.size() / 2; ++s) {
    busiest = std::max(busiest, all[2 * s + 1]);
    total_busy += all[2 * s + 1];
  }
  const double fill_drain_step = ((M - 1) * busiest + total_busy) / M;
  const double samples = Work::batch / step;
  std::printf("bench=pipeline model=%s schedule=%s stages=%d micro_batches=%d batch=%lld threads_per_stage=%d "
              "median_ms=%.1f samples_per_sec=%.1f vs_unpipelined=%.2f bubble_bound=%.3f step_over_cut_bound=%.3f",
              Work::name, Schedule::name, world.size(), M, static_cast<long long>(Work::batch), num_threads(),
              1e3 * step, samples, samples / serial_samples_per_sec, (S - 1) / (M + S - 1), step / fill_drain_step);
  for (std::size_t s = 0; s < all.size() / 2; ++s)
    std::printf(" idle_stage%zu=%.3f cut_bound_stage%zu=%.3f", s, all[2 * s], s, 1 - all[2 * s + 1] / fill_drain_step);
  std::printf("\n");
  std::fflush(stdout);
}

template <class Schedule, class Work>
void run_all(MpiComm& world, const Work& data, double serial) {
  run_pipeline<1, Schedule>(world, data, serial);
  run_pipeline<2, Schedule>(world, data, serial);
  run_pipeline<4, Schedule>(world, data, serial);
  run_pipeline<8, Schedule>(world, data, serial);
  run_pipeline<16, Schedule>(world, data, serial);
}

// The unpipelined run: the whole model on rank 0 alone, one thread (the other ranks wait); then
// every pipeline; rank 0 prints.
template <class Work>
void run(MpiComm& world) {
  const Work data;
  double serial = 0;
  if (world.rank() == 0) {
    auto trainer = make_trainer<Work>();
    std::vector<double> seconds;
    for (int s = 0; s <= steps(); ++s) {
      const auto start = Clock::now();
      trainer->train_step(data.inputs, data.targets);
      if (s > 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    serial = Work::batch / median(seconds);
    std::printf("bench=pipeline model=%s schedule=none stages=1 micro_batches=1 batch=%lld threads_per_stage=%d "
                "median_ms=%.1f samples_per_sec=%.1f\n",
                Work::name, static_cast<long long>(Work::batch), num_threads(), 1e3 * median(seconds), serial);
    std::fflush(stdout);
  }
  std::vector<double> s{serial};
  world.broadcast(s, 0);
  run_all<GPipe>(world, data, s[0]);
  run_all<OneFOneB>(world, data, s[0]);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "tower";
  return run_main(argc, argv, [&](MpiSession& session) {
    MpiComm world(session);
    check(model == "tower" || model == "lm" || model == "lm12", "bench_pipeline: model '", model,
          "' (expected tower, lm or lm12)");
    if (model == "lm")
      run<Lm<4>>(world);
    else if (model == "lm12")
      run<Lm<12>>(world);
    else
      run<Tower>(world);
  });
}
