// Times a training step (forward, backward, SGD with momentum) of the demo CNN (batch 128), of
// CIFAR ResNet-18 and ResNet-50 (batch 64), VGG-16 (128x128, 3 classes, batch 16) and a 5-level
// UNet of widths 16..256 (128x128, 2 classes, per-pixel loss, batch 16), each model's GFLOP/s
// against one large GEMM's (this machine's attainable peak), and where each step's time goes by
// kernel family (core/op_profile.hpp). Each PyTorch peer of bench/torch_peer.hpp that has torch
// (bench/run_train_step.sh gives pip's and Debian's) runs bench/torch_peer.py on the same work in
// the same run, its families from torch.profiler; the ratio to each is printed. One
// machine-readable line per figure:
//   bench=train_step model=... impl=ptrain|pytorch_pip|pytorch_debian ... images_per_sec=...
//   bench=op_breakdown model=... impl=... family=conv_forward|...|autograd_and_allocation ms_per_step=...
// Precision bf16 (third argument) times instead the same five models under MixedPrecision<Bf16>
// (a bfloat16 model, float masters) against torch.autocast("cpu", bfloat16) on the same networks,
// on CPUs with AVX512_BF16 (kernels/cpu/gemm_bf16.hpp), and the bf16 GEMM's rate beside the fp32
// GEMM's (vdpbf16ps does two products per float lane: twice the rate at best); ptrain runs twice,
// on vdpbf16ps and with PTRAIN_CPU_BF16=off (bfloat16 computed in float). Elsewhere it says
// "bf16 not measured: no AVX512_BF16/AMX".
// The bf16 runs print their kernel families too, as impl=ptrain_bf16 and impl=ptrain_widened_bf16.
// Each model's line has the peak resident memory of its step (peak_mb: VmHWM, reset before each
// model through /proc/self/clear_refs, after the Cpu block cache is emptied), ptrain's in this
// process and each peer's in its own.
// Usage: bench_train_step [THREADS [MODELS [fp32|bf16]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ptrain/ptrain.hpp>

#include "torch_peer.hpp"

// Which kernels OpenBLAS runs (it picks them for the CPU when it loads, unless OPENBLAS_CORETYPE
// names some): weak, as the build may use Eigen instead.
extern "C" char* openblas_get_corename(void) __attribute__((weak));

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One n x n x n GEMM's rate: float operands, or (T = bfloat16) bfloat16 operands summed into a
// float C, as the bf16 convolutions call it.
template <class T = float>
double gemm_gflops(std::int64_t n, int repeats) {
  ptrain::Tensor<T> a = ptrain::Tensor<T>::full({n, n}, T(0.5f)), b = a.clone();
  ptrain::Tensor<float> c({n, n});
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    ptrain::kernels::gemm(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return 2.0 * double(n) * n * n / median(times) / 1e9;
}

// The peak resident set from here on: the Cpu block cache handed back (it would otherwise hold the
// last model's blocks) and the kernel's high-water mark reset.
void reset_peak_memory() {
  ptrain::Cpu::empty_cache();
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}
// VmHWM in MiB: the peak resident set since reset_peak_memory (0 where /proc is absent).
double peak_memory_mb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib / 1024;
}

// The timed steps' median, their kernel families' self time (the OpProfile of the timed steps:
// timing each kernel call costs two clock reads) and the rest, autograd and allocation, in ms per step.
struct StepTimes {
  double median_seconds = 0;
  std::map<std::string, double> family_ms;
};

// A step's random images and targets. classes: of the targets; per_pixel: one target per output
// pixel (segmentation).
struct Batch {
  ptrain::Tensor<float> x;
  std::vector<std::int64_t> y;
};
Batch random_batch(ptrain::Shape input_shape, int classes, bool per_pixel) {
  ptrain::Rng rng(0);
  Batch batch{ptrain::Tensor<float>(input_shape), {}};
  for (std::int64_t i = 0; i < batch.x.numel(); ++i) batch.x[i] = static_cast<float>(rng.normal());
  const std::int64_t targets = per_pixel ? input_shape[0] * input_shape[2] * input_shape[3] : input_shape[0];
  batch.y.resize(static_cast<std::size_t>(targets));
  for (auto& t : batch.y) t = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
  return batch;
}

// Times step() (one training step), its kernels profiled after the warm-up.
template <class Step>
StepTimes time_loop(Step&& step, int warmup, int steps) {
  std::vector<double> times;
  ptrain::OpProfile profile;
  for (int i = 0; i < warmup + steps; ++i) {
    std::optional<ptrain::OpProfileScope> profiling;
    if (i >= warmup) profiling.emplace(profile);
    const auto start = Clock::now();
    step();
    if (i >= warmup) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  StepTimes result{.median_seconds = median(times)};
  double total_ms = 0;
  for (double t : times) total_ms += 1e3 * t / steps;
  for (const auto& [family, time] : profile.families()) result.family_ms[family] = time.self_us / 1e3 / steps;
  result.family_ms["autograd_and_allocation"] = total_ms - profile.self_us() / 1e3 / steps;
  return result;
}

// A float model's step: forward, backward, SGD with momentum.
template <class Model>
StepTimes time_steps(Model& model, ptrain::Shape input_shape, int warmup, int steps, int classes = 10,
                     bool per_pixel = false) {
  const Batch batch = random_batch(input_shape, classes, per_pixel);
  ptrain::Sgd<float> sgd(model.parameters(), {.lr = 0.01, .momentum = 0.9});
  return time_loop(
      [&] {
        model.zero_grad();
        ptrain::backward(ptrain::cross_entropy(model.forward(ptrain::Var<float>(batch.x)), batch.y));
        ptrain::NoGradGuard no_grad;
        sgd.step();
      },
      warmup, steps);
}

// A bfloat16 model's step under MixedPrecision<Bf16>, as the Trainer runs it: forward and backward
// in bfloat16, the gradients copied to the float masters, SGD on them, the masters rounded back.
template <class Model>
StepTimes time_bf16_steps(Model& model, ptrain::Shape input_shape, int warmup, int steps, int classes = 10,
                          bool per_pixel = false) {
  const Batch batch = random_batch(input_shape, classes, per_pixel);
  const ptrain::Tensor<ptrain::bfloat16> x = ptrain::tensor_cast<ptrain::bfloat16>(batch.x);
  ptrain::MixedPrecision<ptrain::Bf16> amp(model);
  ptrain::Sgd<float> sgd(amp.master_parameters(), {.lr = 0.01, .momentum = 0.9});
  return time_loop(
      [&] {
        model.zero_grad();
        ptrain::backward(ptrain::cross_entropy(model.forward(ptrain::Var<ptrain::bfloat16>(x)), batch.y));
        ptrain::NoGradGuard no_grad;
        const bool ok = amp.before_optimizer_step(model);
        if (ok) sgd.step();
        amp.step_decided(ok);
        amp.after_optimizer_step(model);
      },
      warmup, steps);
}

// Training FLOPs per image (forward MACs x 2 x 3: forward, grad-input, grad-weight).
const std::map<std::string, double> train_flops_per_image = {
    {"small_cnn", 3 * 2 * 4.2412e6},
    {"resnet18_cifar", 3 * 2 * 0.5562e9},
    {"resnet50_cifar", 3 * 2 * 1.2978e9},
    {"vgg16_128", 3 * 2 * 5.1307e9},
    {"unet_128", 3 * 2 * 0.7584e9},
};

void print_family(const std::string& model, const std::string& impl, const std::string& family, double ms) {
  std::printf("bench=op_breakdown model=%s impl=%s family=%s ms_per_step=%.2f\n", model.c_str(), impl.c_str(),
              family.c_str(), ms);
}

// One model of the comparison: its step time and kernel families, printed, and its images/s kept
// for the ratio with PyTorch.
void report(std::map<std::string, double>& ours, const std::string& name, int threads, std::int64_t batch,
            const StepTimes& times, double peak) {
  const double seconds = times.median_seconds;
  ours[name] = static_cast<double>(batch) / seconds;
  std::printf("bench=train_step model=%s impl=ptrain threads=%d batch=%lld median_ms=%.2f images_per_sec=%.2f "
              "peak_mb=%.1f",
              name.c_str(), threads, static_cast<long long>(batch), 1e3 * seconds, ours[name], peak_memory_mb());
  if (train_flops_per_image.count(name))
    std::printf(" gflops=%.1f peak_fraction=%.3f", ours[name] * train_flops_per_image.at(name) / 1e9,
                ours[name] * train_flops_per_image.at(name) / 1e9 / peak);
  std::printf("\n");
  for (const auto& [family, ms] : times.family_ms) print_family(name, "ptrain", family, ms);
  std::fflush(stdout);
}

// Each peer's images/s by model, with its torch version and thread count.
struct PeerRun {
  std::map<std::string, double> images_per_sec, peak_mb;
  std::string torch_version, threads;
};

// mode: "profile" (fp32, with the kernel families) or "bf16" (under torch.autocast).
PeerRun run_pytorch(const bench::TorchPeer& peer, int threads, const std::string& models, const char* mode) {
  PeerRun run;
  for (const std::string& line :
       bench::peer_lines(peer, "torch_peer.py", std::to_string(threads) + " " + models + " " + mode)) {
    if (!bench::json_field(line, "family").empty()) {
      print_family(bench::json_field(line, "model"), "pytorch_" + peer.name, bench::json_field(line, "family"),
                   std::atof(bench::json_field(line, "ms_per_step").c_str()));
      continue;
    }
    run.images_per_sec[bench::json_field(line, "model")] = std::atof(bench::json_field(line, "images_per_sec").c_str());
    run.peak_mb[bench::json_field(line, "model")] = std::atof(bench::json_field(line, "peak_mb").c_str());
    run.torch_version = bench::json_field(line, "torch");
    run.threads = bench::json_field(line, "threads");
  }
  return run;
}

// Runs each PyTorch peer on `models` (mode as run_pytorch's) and prints its images/s and ptrain's
// ratio to it; tag follows the model in those lines ("" or " precision=bf16").
void compare_with_peers(const std::map<std::string, double>& ours, int threads, const std::string& models,
                        const char* mode, const char* tag) {
  for (const bench::TorchPeer& peer : bench::torch_peers()) {
    const PeerRun torch = run_pytorch(peer, threads, models, mode);
    if (torch.images_per_sec.empty()) {
      bench::print_unavailable("train_step", peer);
      continue;
    }
    for (const auto& [model, ips] : torch.images_per_sec) {
      std::printf("bench=train_step model=%s%s impl=pytorch_%s torch=%s threads=%s images_per_sec=%.1f peak_mb=%.1f\n",
                  model.c_str(), tag, peer.name.c_str(), torch.torch_version.c_str(), torch.threads.c_str(), ips,
                  torch.peak_mb.at(model));
      if (ours.count(model))
        std::printf("bench=train_step model=%s%s ratio_ptrain_over_pytorch_%s=%.3f\n", model.c_str(), tag,
                    peer.name.c_str(), ours.at(model) / ips);
    }
  }
}

// Precision bf16 (see the top of the file): the five models among `only`.
int run_bf16(int threads, const std::string& only) {
  if (!ptrain::kernels::cpu_has_bf16_dot()) {
    std::printf("bench=train_step precision=bf16 status=not_measured reason=\"bf16 not measured: no AVX512_BF16/AMX\"\n");
    return 0;
  }
  const double fp32 = gemm_gflops<float>(2048, 5), bf16 = gemm_gflops<ptrain::bfloat16>(2048, 5);
  std::printf("bench=gemm impl=ptrain n=2048 threads=%d fp32_gflops=%.1f bf16_gflops=%.1f bf16_over_fp32=%.3f\n",
              threads, fp32, bf16, bf16 / fp32);
  // impl -> model -> images/s; ptrain_widened: PTRAIN_CPU_BF16=off.
  std::map<std::string, std::map<std::string, double>> ips;
  std::string models;
  const auto run = [&](const std::string& model, std::int64_t batch, auto make, ptrain::Shape shape, int warmup,
                       int steps, int classes = 10, bool per_pixel = false) {
    if (only.find(model) == std::string::npos) return;
    models += (models.empty() ? "" : ",") + model;
    for (const char* path : {"on", "off"}) {
      ::setenv("PTRAIN_CPU_BF16", path, 1);
      ptrain::manual_seed(0);
      reset_peak_memory();
      auto net = make();
      const StepTimes times = time_bf16_steps(*net, shape, warmup, steps, classes, per_pixel);
      const double seconds = times.median_seconds;
      const std::string impl = std::string(path) == "on" ? "ptrain" : "ptrain_widened";
      ips[impl][model] = static_cast<double>(batch) / seconds;
      std::printf("bench=train_step model=%s precision=bf16 impl=%s threads=%d batch=%lld median_ms=%.2f "
                  "images_per_sec=%.2f peak_mb=%.1f\n",
                  model.c_str(), impl.c_str(), threads, static_cast<long long>(batch), 1e3 * seconds, ips[impl][model],
                  peak_memory_mb());
      for (const auto& [family, ms] : times.family_ms) print_family(model, impl + "_bf16", family, ms);
      std::fflush(stdout);
    }
    ::unsetenv("PTRAIN_CPU_BF16");
  };
  using ptrain::bfloat16;
  run("small_cnn", 128, [] { return ptrain::make<ptrain::SmallCnn<bfloat16>>(); }, {128, 1, 28, 28}, 3, 20);
  run("resnet18_cifar", 64, [] { return ptrain::resnet18<bfloat16>({.num_classes = 10, .cifar_stem = true}); },
      {64, 3, 32, 32}, 2, 8);
  run("resnet50_cifar", 64, [] { return ptrain::resnet50<bfloat16>({.num_classes = 10, .cifar_stem = true}); },
      {64, 3, 32, 32}, 1, 4);
  run("vgg16_128", 16, [] { return ptrain::vgg16<bfloat16>({.num_classes = 3}); }, {16, 3, 128, 128}, 1, 4, 3);
  run("unet_128", 16,
      [] {
        return ptrain::make<ptrain::UNet<bfloat16>>(
            ptrain::UNetOptions{.in_channels = 3, .classes = 2, .levels = 5, .base_width = 16});
      },
      {16, 3, 128, 128}, 1, 4, 2, true);
  if (models.empty()) {
    std::printf("bench=train_step precision=bf16 status=not_measured reason=\"no model of %s\"\n", only.c_str());
    return 0;
  }
  for (const auto& [model, ours] : ips["ptrain"])
    std::printf("bench=train_step model=%s precision=bf16 ratio_vdpbf16ps_over_widened=%.3f\n", model.c_str(),
                ours / ips["ptrain_widened"][model]);
  compare_with_peers(ips["ptrain"], threads, models, "bf16", " precision=bf16");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::string only = argc > 2 ? argv[2] : "small_cnn,resnet18_cifar,resnet50_cifar,vgg16_128,unet_128";
  const std::string precision = argc > 3 ? argv[3] : "fp32";
  if (precision != "fp32" && precision != "bf16") {
    std::fprintf(stderr, "bench_train_step: precision must be fp32 or bf16, got '%s'\n", precision.c_str());
    return 2;
  }
  ptrain::set_num_threads(threads);
  ptrain::manual_seed(0);
  if (precision == "bf16") return run_bf16(threads, only);

  const double peak = gemm_gflops<float>(2048, 5);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("bench=gemm impl=ptrain n=2048 threads=%d gflops=%.1f openblas_core=%s OPENBLAS_CORETYPE=%s\n", threads,
              peak, openblas_get_corename ? openblas_get_corename() : "none", coretype ? coretype : "unset");

  std::map<std::string, double> ours;
  const auto wanted = [&](const char* name) { return only.find(name) != std::string::npos; };
  if (wanted("small_cnn")) {
    reset_peak_memory();
    ptrain::SmallCnn<float> net;
    report(ours, "small_cnn", threads, 128, time_steps(net, {128, 1, 28, 28}, 3, 20), peak);
  }
  if (wanted("resnet18_cifar")) {
    reset_peak_memory();
    auto net = ptrain::resnet18<float>({.num_classes = 10, .cifar_stem = true});
    report(ours, "resnet18_cifar", threads, 64, time_steps(*net, {64, 3, 32, 32}, 2, 8), peak);
  }
  if (wanted("resnet50_cifar")) {
    reset_peak_memory();
    auto net = ptrain::resnet50<float>({.num_classes = 10, .cifar_stem = true});
    report(ours, "resnet50_cifar", threads, 64, time_steps(*net, {64, 3, 32, 32}, 1, 4), peak);
  }
  if (wanted("vgg16_128")) {
    reset_peak_memory();
    auto net = ptrain::vgg16<float>({.num_classes = 3});
    report(ours, "vgg16_128", threads, 16, time_steps(*net, {16, 3, 128, 128}, 1, 4, 3), peak);
  }
  if (wanted("unet_128")) {
    reset_peak_memory();
    ptrain::UNet<float> net({.in_channels = 3, .classes = 2, .levels = 5, .base_width = 16});
    report(ours, "unet_128", threads, 16, time_steps(net, {16, 3, 128, 128}, 1, 4, 2, true), peak);
  }

  compare_with_peers(ours, threads, only, "profile", "");
  return 0;
}
