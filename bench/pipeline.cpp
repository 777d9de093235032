// Pipeline bubble and throughput: run under `mpiexec -n 2` (S = 2 stages, one thread each).
// A tower of equal 3x3 convolutions on 32x32 images, so that balancing by parameters balances the
// work. For M = 1, 2, 4, 8, 16 micro-batches and both schedules it prints, per stage, the measured
// idle fraction (time blocked on the neighbour / step time) next to the bound (S-1)/(M+S-1), and
// images/s against the unpipelined run of the same model and batch on one rank and one thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <ptrain/mpi.hpp>

namespace {

using namespace ptrain;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t batch = 64, width = 32, side = 32;
constexpr int depth = 6;

std::shared_ptr<Sequential<float>> tower() {
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

struct Data {
  Tensor<float> inputs{Shape{batch, 3, side, side}};
  std::vector<std::int64_t> targets;
  Data() {
    Rng rng(5);
    for (std::int64_t i = 0; i < inputs.numel(); ++i) inputs[i] = static_cast<float>(rng.normal());
    for (std::int64_t i = 0; i < batch; ++i) targets.push_back(static_cast<std::int64_t>(rng.below(10)));
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

template <class... Policies>
auto make_trainer(std::shared_ptr<Sequential<float>> net, Policies... policies) {
  auto sgd = std::make_shared<Sgd<float>>(net->parameters(), SgdOptions{.lr = 0.01, .momentum = 0.9});
  return std::make_unique<Trainer<Sequential<float>, Policies...>>(
      net, sgd, TrainerOptions{.progress_bar = false, .print_epochs = false}, policies...);
}

template <int M, class Schedule>
void run_pipeline(MpiComm& world, const Data& data, double serial_images_per_sec) {
  using P = Pipeline<M, Schedule>;
  auto trainer = make_trainer(tower(), P(world, {.print_plan = M == 1 && std::is_same_v<Schedule, GPipe>}));
  std::vector<double> seconds, idle;
  for (int s = 0; s <= steps(); ++s) {
    world.barrier();
    const auto start = Clock::now();
    trainer->train_step(data.inputs, data.targets);
    if (s == 0) continue;
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    const auto& stats = trainer->template policy<P>().last_step();
    idle.push_back(stats.wait_seconds / stats.step_seconds);
  }
  // Every stage's idle fraction comes to rank 0, which prints.
  std::vector<double> mine{median(idle)}, all(static_cast<std::size_t>(world.size()));
  world.allgather(mine, all);
  const double step = median(seconds), S = world.size();
  if (world.rank() != 0) return;
  const double images = batch / step;
  std::printf("bench=pipeline schedule=%s stages=%d micro_batches=%d batch=%lld threads_per_stage=%d median_ms=%.1f "
              "images_per_sec=%.1f vs_unpipelined=%.2f bubble_bound=%.3f",
              Schedule::name, world.size(), M, static_cast<long long>(batch), num_threads(), 1e3 * step, images,
              images / serial_images_per_sec, (S - 1) / (M + S - 1));
  for (std::size_t s = 0; s < all.size(); ++s) std::printf(" idle_stage%zu=%.3f", s, all[s]);
  std::printf("\n");
  std::fflush(stdout);
}

template <class Schedule>
void run_all(MpiComm& world, const Data& data, double serial) {
  run_pipeline<1, Schedule>(world, data, serial);
  run_pipeline<2, Schedule>(world, data, serial);
  run_pipeline<4, Schedule>(world, data, serial);
  run_pipeline<8, Schedule>(world, data, serial);
  run_pipeline<16, Schedule>(world, data, serial);
}

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, [](MpiSession& session) {
    MpiComm world(session);
    const Data data;
    // The unpipelined run: the whole model on rank 0 alone, one thread (the other ranks wait).
    double serial = 0;
    if (world.rank() == 0) {
      auto trainer = make_trainer(tower());
      std::vector<double> seconds;
      for (int s = 0; s <= steps(); ++s) {
        const auto start = Clock::now();
        trainer->train_step(data.inputs, data.targets);
        if (s > 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
      serial = batch / median(seconds);
      std::printf("bench=pipeline schedule=none stages=1 micro_batches=1 batch=%lld threads_per_stage=%d "
                  "median_ms=%.1f images_per_sec=%.1f\n",
                  static_cast<long long>(batch), num_threads(), 1e3 * median(seconds), serial);
      std::fflush(stdout);
    }
    std::vector<double> s{serial};
    world.broadcast(s, 0);
    run_all<GPipe>(world, data, s[0]);
    run_all<OneFOneB>(world, data, s[0]);
  });
}
