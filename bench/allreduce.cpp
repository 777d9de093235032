// Gradient synchronisation of a ResNet-18-sized set of gradients (the CIFAR ResNet-18: 62
// tensors, 11,173,962 floats) fused into one flat buffer, under mpiexec -n 2:
//   raw_mpi_fp32        one MPI_Allreduce of the flat float buffer (the yardstick)
//   mpicomm_fp32        MpiComm::allreduce_sum of the same buffer (in pieces of 2 MiB)
//   mpicomm_fp32_one_piece  the same with pieces larger than the buffer: one MPI_Allreduce
//   mpicomm_fp32_async  MpiComm::iallreduce_sum + wait (MPICH's non-blocking algorithm)
//   mpicomm_fp16_wire   allreduce_sum of a half buffer of the same length (the wire alone)
//   mpicomm_fp16        cast to half, allreduce_sum, cast back: the Fp16 compression path
//   mpicomm_bf16        the same with bfloat16
//   mpicomm_fp32_per_tensor  one allreduce per tensor, unfused, for scale
// Each figure is the median over repeats (PTRAIN_BENCH_REPEATS, default 15) of the slowest
// rank's time; the implementations take turns within each repeat. PTRAIN_BENCH_PIECE_BYTES sets
// MpiComm's allreduce piece size (default 2 MiB). One line per figure:
//   bench=allreduce impl=... ranks=... tensors=... elements=... bytes=... median_ms=... ratio_to_raw=...
// Then the Trainer's preemption check (train/preemption.hpp), which every step of a fit that saves
// checkpoints runs: the signal flag read and the ranks' agreement on it, one allreduce of one
// double (DataParallel's reduce); 1000 checks per run, the median per check:
//   bench=preemption_check ranks=... us_per_check=...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <ptrain/mpi.hpp>

namespace {

using Clock = std::chrono::steady_clock;

// Parameter counts of the CIFAR ResNet-18 (3x3 stem, BasicBlocks 64-128-256-512, 10 classes),
// in registration order: weights and biases of convolutions, batch norms and the classifier.
std::vector<std::size_t> resnet18_tensor_sizes() {
  std::vector<std::size_t> sizes{3 * 64 * 9, 64, 64};
  int in = 64;
  for (int width : {64, 128, 256, 512}) {
    for (int block = 0; block < 2; ++block) {
      const bool downsample = block == 0 && width != in;
      sizes.insert(sizes.end(), {std::size_t(in) * width * 9, std::size_t(width), std::size_t(width),
                                 std::size_t(width) * width * 9, std::size_t(width), std::size_t(width)});
      if (downsample) sizes.insert(sizes.end(), {std::size_t(in) * width, std::size_t(width), std::size_t(width)});
      in = width;
    }
  }
  sizes.insert(sizes.end(), {512 * 10, 10});
  return sizes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The implementations take turns within each repeat, so that they share the machine's noise.
struct Case {
  std::string impl;
  std::size_t bytes;
  std::function<void()> reset;  // untimed, before each run
  std::function<void()> run;
  std::vector<double> seconds = {};
};

void time_cases(std::vector<Case>& cases, MPI_Comm world, int warmup, int repeats) {
  for (int i = 0; i < warmup + repeats; ++i)
    for (Case& c : cases) {
      c.reset();
      MPI_Barrier(world);
      const auto start = Clock::now();
      c.run();
      double seconds = std::chrono::duration<double>(Clock::now() - start).count(), slowest = 0;
      MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, world);
      if (i >= warmup) c.seconds.push_back(slowest);
    }
}

}  // namespace

int main(int argc, char** argv) {
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    ptrain::MpiComm whole(session);  // one MPI_Allreduce per call, like the raw call
    whole.set_allreduce_piece_bytes(std::size_t{1} << 40);
    const auto sizes = resnet18_tensor_sizes();
    std::size_t n = 0;
    for (auto s : sizes) n += s;

    // Gradient-like values, different on each rank; every repeat starts from them again.
    std::vector<float> pristine(n);
    ptrain::Rng rng(1234 + static_cast<std::uint64_t>(session.rank()));
    for (auto& g : pristine) g = static_cast<float>(rng.normal(0.0, 1e-2));
    std::vector<float> flat(n);
    std::vector<ptrain::half> flat_half(n);
    std::vector<ptrain::bfloat16> flat_bf16(n);
    auto reset = [&] { std::copy(pristine.begin(), pristine.end(), flat.begin()); };
    auto reset_half = [&] {
      reset();
      ptrain::convert(std::span<const float>(flat), std::span<ptrain::half>(flat_half));
    };

    int repeats = 15;
    if (const char* r = std::getenv("PTRAIN_BENCH_REPEATS")) repeats = std::max(1, std::atoi(r));
    if (const char* p = std::getenv("PTRAIN_BENCH_PIECE_BYTES")) world.set_allreduce_piece_bytes(std::strtoull(p, nullptr, 10));
    const std::size_t fp32_bytes = n * sizeof(float), fp16_bytes = n * sizeof(ptrain::half);
    const MPI_Comm raw = session.world_handle();
    std::vector<Case> cases;
    cases.push_back({"raw_mpi_fp32", fp32_bytes, reset, [&] {
                       MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, raw);
                     }});
    cases.push_back({"mpicomm_fp32", fp32_bytes, reset, [&] { world.allreduce_sum(flat); }});
    cases.push_back({"mpicomm_fp32_one_piece", fp32_bytes, reset, [&] { whole.allreduce_sum(flat); }});
    cases.push_back({"mpicomm_fp32_async", fp32_bytes, reset, [&] { world.iallreduce_sum(flat).wait(); }});
    cases.push_back({"mpicomm_fp16_wire", fp16_bytes, reset_half, [&] { world.allreduce_sum(flat_half); }});
    cases.push_back({"mpicomm_fp16", fp16_bytes, reset, [&] {
                       ptrain::convert(std::span<const float>(flat), std::span<ptrain::half>(flat_half));
                       world.allreduce_sum(flat_half);
                       ptrain::convert(std::span<const ptrain::half>(flat_half), std::span<float>(flat));
                     }});
    cases.push_back({"mpicomm_bf16", fp16_bytes, reset, [&] {
                       ptrain::convert(std::span<const float>(flat), std::span<ptrain::bfloat16>(flat_bf16));
                       world.allreduce_sum(flat_bf16);
                       ptrain::convert(std::span<const ptrain::bfloat16>(flat_bf16), std::span<float>(flat));
                     }});
    cases.push_back({"mpicomm_fp32_per_tensor", fp32_bytes, reset, [&] {
                       std::size_t at = 0;
                       for (auto s : sizes) {
                         world.allreduce_sum(std::span<float>(flat.data() + at, s));
                         at += s;
                       }
                     }});
    time_cases(cases, raw, 3, repeats);

    constexpr int checks = 1000;
    std::vector<Case> preemption{{"preemption_check", sizeof(double), [] {}, [&] {
                                    for (int i = 0; i < checks; ++i) {
                                      double flag = ptrain::PreemptionWatch::signal() != 0 ? 1 : 0;
                                      ptrain::host_allreduce_sum(world, std::span<double>(&flag, 1));
                                    }
                                  }}};
    time_cases(preemption, raw, 3, repeats);

    if (session.rank() == 0) {
      const double yardstick = median(cases.front().seconds);
      for (const Case& c : cases) {
        const double seconds = median(c.seconds);
        char line[512];
        std::snprintf(line, sizeof line,
                      "bench=allreduce impl=%s ranks=%d tensors=%zu elements=%zu bytes=%zu median_ms=%.3f "
                      "ratio_to_raw=%.3f",
                      c.impl.c_str(), world.size(), sizes.size(), n, c.bytes, seconds * 1e3, seconds / yardstick);
        ptrain::log_line(line);
      }
      char line[128];
      std::snprintf(line, sizeof line, "bench=preemption_check ranks=%d us_per_check=%.3f", world.size(),
                    median(preemption.front().seconds) / checks * 1e6);
      ptrain::log_line(line);
    }
  });
}
