// Images/s and GPU memory of a training step on the GPU (forward, backward, SGD with momentum) of
// ResNet-50 at 224x224 and of CIFAR ResNet-18 at 32x32, in fp32 or in fp16 AMP
// (MixedPrecision<Fp16, Cuda>: a half model, fp32 masters, Apex's dynamic loss scale). One
// configuration per process, so that the allocator's peak is that configuration's.
// bench/torch_cuda_peer.py times PyTorch on the same work; scripts/gpu_check.sh runs both in one
// run. One line per configuration:
//   bench=cuda_throughput model=resnet50|resnet18_cifar precision=fp32|fp16 impl=ptrain gpu=NAME batch=B
//     steps=N skipped_steps=K first_step_s=S median_ms=M images_per_sec=I peak_in_use_mib=P device_used_mib=U
// Each step is timed to its end (cudaDeviceSynchronize); the median of the timed steps counts.
// Timing stops after STEPS timed steps or MAX_SECONDS, whichever comes first (at least one).
// Without a GPU: "no CUDA device found" on stderr, exit 2.
// Usage: bench_cuda_throughput MODEL PRECISION [BATCH [STEPS [MAX_SECONDS]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/cuda.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using ptrain::Cuda;

struct Config {
  std::string model, precision;
  std::int64_t batch = 128;
  int steps = 10;
  double max_seconds = 30;
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Random normal images of `shape` as T on the GPU, and random targets below `classes`.
template <class T>
ptrain::Tensor<T, Cuda> random_images(const ptrain::Shape& shape) {
  ptrain::Rng rng(0);
  ptrain::Tensor<float> x(shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
  return ptrain::tensor_cast<T>(x).template to<Cuda>();
}

std::vector<std::int64_t> random_targets(std::int64_t batch, std::int64_t classes) {
  ptrain::Rng rng(1);
  std::vector<std::int64_t> y(static_cast<std::size_t>(batch));
  for (auto& t : y) t = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
  return y;
}

// Runs step() once untimed, then until c.steps timed steps or c.max_seconds; prints the line.
template <class Step>
void time_and_report(const Config& c, Step&& step, const int& skipped) {
  cudaDeviceProp prop{};
  ptrain::cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties(0)");
  auto start = Clock::now();
  step();
  ptrain::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double first = seconds_since(start);
  std::vector<double> times;
  const auto timing = Clock::now();
  while (times.empty() || (static_cast<int>(times.size()) < c.steps && seconds_since(timing) < c.max_seconds)) {
    start = Clock::now();
    step();
    ptrain::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::size_t free_bytes = 0, total_bytes = 0;
  ptrain::cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  std::string gpu = prop.name;
  std::replace(gpu.begin(), gpu.end(), ' ', '_');
  std::printf("bench=cuda_throughput model=%s precision=%s impl=ptrain gpu=%s batch=%lld steps=%zu skipped_steps=%d "
              "first_step_s=%.3f median_ms=%.2f images_per_sec=%.1f peak_in_use_mib=%.0f device_used_mib=%.0f\n",
              c.model.c_str(), c.precision.c_str(), gpu.c_str(), static_cast<long long>(c.batch), times.size(), skipped,
              first, 1e3 * median, static_cast<double>(c.batch) / median, mib(Cuda::memory_stats().peak_in_use_bytes),
              mib(total_bytes - free_bytes));
  std::fflush(stdout);
}

// fp32: the float model stepped by Sgd<float, Cuda>.
template <class Net>
void run_fp32(const Config& c, Net& model, const ptrain::Shape& shape, std::int64_t classes) {
  const ptrain::Var<float, Cuda> x(random_images<float>(shape));
  const std::vector<std::int64_t> y = random_targets(c.batch, classes);
  ptrain::Sgd<float, Cuda> sgd(model.parameters(), {.lr = 0.01, .momentum = 0.9});
  const int skipped = 0;
  time_and_report(
      c,
      [&] {
        model.zero_grad();
        ptrain::backward(ptrain::cross_entropy(model.forward(x), y));
        ptrain::NoGradGuard no_grad;
        sgd.step();
      },
      skipped);
}

// fp16 AMP as the Trainer drives MixedPrecision<Fp16, Cuda>: the loss's gradient scaled, the
// gradients unscaled into the fp32 masters and checked, SGD on the masters unless they overflowed.
template <class Net>
void run_fp16(const Config& c, Net& model, const ptrain::Shape& shape, std::int64_t classes) {
  const ptrain::Var<ptrain::half, Cuda> x(random_images<ptrain::half>(shape));
  const std::vector<std::int64_t> y = random_targets(c.batch, classes);
  ptrain::MixedPrecision<ptrain::Fp16, Cuda> amp(model);
  ptrain::Sgd<float, Cuda> sgd(amp.master_parameters(), {.lr = 0.01, .momentum = 0.9});
  int skipped = 0;
  time_and_report(
      c,
      [&] {
        model.zero_grad();
        ptrain::backward(ptrain::cross_entropy(model.forward(x), y, 0.0, amp.loss_scale()));
        const bool taken = amp.before_optimizer_step(model);
        if (taken) {
          ptrain::NoGradGuard no_grad;
          sgd.step();
        }
        amp.step_decided(taken);
        amp.after_optimizer_step(model);
        skipped += taken ? 0 : 1;
      },
      skipped);
}

template <class T>
void run(const Config& c) {
  ptrain::manual_seed(0);
  const auto go = [&](auto model, const ptrain::Shape& shape, std::int64_t classes) {
    if constexpr (std::is_same_v<T, float>) run_fp32(c, *model, shape, classes);
    else run_fp16(c, *model, shape, classes);
  };
  if (c.model == "resnet50") go(ptrain::resnet50<T, Cuda>({.num_classes = 1000}), {c.batch, 3, 224, 224}, 1000);
  else go(ptrain::resnet18<T, Cuda>({.num_classes = 10, .cifar_stem = true}), {c.batch, 3, 32, 32}, 10);
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (argc < 3 || (std::string(argv[1]) != "resnet50" && std::string(argv[1]) != "resnet18_cifar") ||
      (std::string(argv[2]) != "fp32" && std::string(argv[2]) != "fp16")) {
    std::fprintf(stderr, "usage: bench_cuda_throughput resnet50|resnet18_cifar fp32|fp16 [BATCH [STEPS [MAX_SECONDS]]]\n");
    return 64;
  }
  c.model = argv[1];
  c.precision = argv[2];
  if (argc > 3) c.batch = std::atoll(argv[3]);
  if (argc > 4) c.steps = std::atoi(argv[4]);
  if (argc > 5) c.max_seconds = std::atof(argv[5]);
  if (c.batch < 1 || c.steps < 1 || !(c.max_seconds > 0)) {
    std::fprintf(stderr, "bench_cuda_throughput: BATCH and STEPS must be at least 1 and MAX_SECONDS above 0\n");
    return 64;
  }
  try {
    (void)ptrain::require_cuda_device();
  } catch (const ptrain::NoCudaDevice& e) {
    std::fprintf(stderr, "bench_cuda_throughput: %s\n", e.what());
    return 2;
  }
  try {
    if (c.precision == "fp32") run<float>(c);
    else run<ptrain::half>(c);
  } catch (const std::exception& e) {
    // Out of memory among them: the line says so, in the same form as a measurement.
    std::string reason = e.what();
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    std::printf("bench=cuda_throughput model=%s precision=%s impl=ptrain batch=%lld status=error note=%s\n",
                c.model.c_str(), c.precision.c_str(), static_cast<long long>(c.batch), reason.c_str());
    return 1;
  }
  return 0;
}
