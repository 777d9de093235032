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
// GEMM's (vdpbf16ps does two products per float lane: twice the rate at best; AMX tiles where the
// CPU has them, said by bf16_engine=amx|vdpbf16ps); ptrain runs twice,
// on vdpbf16ps and with PTRAIN_CPU_BF16=off (bfloat16 computed in float); the families are
// impl=ptrain_bf16, ptrain_widened_bf16 and pytorch_<peer>_bf16 there, the peer's autocast copies
// under family=cast as ptrain's. Elsewhere it says
// "bf16 not measured: no AVX512_BF16/AMX".
// Each model is measured in a process of its own (this program runs itself once per model, and
// per kernel path under bf16; each peer runs once per model), so that its line's peak resident
// memory (peak_mb: VmHWM) holds none of another model's. ptrain's line adds what the Cpu device
// counted at its peak: live_peak_mb, the tensor storage alive at once (scratch included), and
// reserved_peak_mb, that plus the free blocks its cache held at the time (device/caching_allocator.hpp).
// Usage: bench_train_step [THREADS [MODELS [fp32|bf16]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

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

// VmHWM in MiB: this process's peak resident set (0 where /proc is absent).
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
// The peak figures of a ptrain line: the resident set's, and the Cpu device's counts beside it.
std::string peak_fields() {
  char text[160];
  std::snprintf(text, sizeof text, "peak_mb=%.1f live_peak_mb=%.1f reserved_peak_mb=%.1f", peak_memory_mb(),
                static_cast<double>(ptrain::Cpu::peak_live_bytes()) / (1 << 20),
                static_cast<double>(ptrain::Cpu::cache_stats().peak_reserved_bytes) / (1 << 20));
  return text;
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
// in bfloat16, the gradients copied to the float masters, SGD on them, rounding the masters back
// into the model as it steps (the Trainer hands it that: hand_rounding_to_optimizer).
template <class Model>
StepTimes time_bf16_steps(Model& model, ptrain::Shape input_shape, int warmup, int steps, int classes = 10,
                          bool per_pixel = false) {
  const Batch batch = random_batch(input_shape, classes, per_pixel);
  const ptrain::Tensor<ptrain::bfloat16> x = ptrain::tensor_cast<ptrain::bfloat16>(batch.x);
  ptrain::MixedPrecision<ptrain::Bf16> amp(model);
  ptrain::Sgd<float> sgd(amp.master_parameters(), {.lr = 0.01, .momentum = 0.9});
  sgd.round_into(amp.hand_rounding_to_optimizer(sgd.params()));
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

// The models, in the order they run: batch, input shape, warm-up and timed steps, classes, and
// whether the loss is per pixel (segmentation).
struct ModelCase {
  const char* name;
  std::int64_t batch;
  ptrain::Shape input_shape;
  int warmup, steps, classes;
  bool per_pixel;
};
const std::vector<ModelCase> model_cases = {
    {"small_cnn", 128, {128, 1, 28, 28}, 3, 20, 10, false},
    {"resnet18_cifar", 64, {64, 3, 32, 32}, 2, 8, 10, false},
    {"resnet50_cifar", 64, {64, 3, 32, 32}, 1, 4, 10, false},
    {"vgg16_128", 16, {16, 3, 128, 128}, 1, 4, 3, false},
    {"unet_128", 16, {16, 3, 128, 128}, 1, 4, 2, true},
};

// Builds the named model of scalar T and times its step (fp32: time_steps, bf16: time_bf16_steps).
template <class T>
StepTimes time_model(const ModelCase& c) {
  const auto timed = [&](auto& net) {
    if constexpr (std::is_same_v<T, float>)
      return time_steps(net, c.input_shape, c.warmup, c.steps, c.classes, c.per_pixel);
    else
      return time_bf16_steps(net, c.input_shape, c.warmup, c.steps, c.classes, c.per_pixel);
  };
  const std::string name = c.name;
  if (name == "small_cnn") return timed(*ptrain::make<ptrain::SmallCnn<T>>());
  if (name == "resnet18_cifar") return timed(*ptrain::resnet18<T>({.num_classes = 10, .cifar_stem = true}));
  if (name == "resnet50_cifar") return timed(*ptrain::resnet50<T>({.num_classes = 10, .cifar_stem = true}));
  if (name == "vgg16_128") return timed(*ptrain::vgg16<T>({.num_classes = 3}));
  return timed(*ptrain::make<ptrain::UNet<T>>(
      ptrain::UNetOptions{.in_channels = 3, .classes = 2, .levels = 5, .base_width = 16}));
}

// One model measured in this process (the child's side of run_alone): its ptrain line and its
// kernel families (under bf16 as impl=ptrain_bf16 and impl=ptrain_widened_bf16). gemm_gflops: the parent's GEMM rate, for peak_fraction.
void measure_here(const ModelCase& c, int threads, const std::string& precision, double gemm_rate) {
  ptrain::manual_seed(0);
  const bool bf16 = precision == "bf16";
  const StepTimes times = bf16 ? time_model<ptrain::bfloat16>(c) : time_model<float>(c);
  const double seconds = times.median_seconds, ips = static_cast<double>(c.batch) / seconds;
  const char* path = std::getenv("PTRAIN_CPU_BF16");
  const std::string impl = bf16 && path && std::string(path) == "off" ? "ptrain_widened" : "ptrain";
  std::printf("bench=train_step model=%s%s impl=%s threads=%d batch=%lld median_ms=%.2f images_per_sec=%.2f %s",
              c.name, bf16 ? " precision=bf16" : "", impl.c_str(), threads, static_cast<long long>(c.batch),
              1e3 * seconds, ips, peak_fields().c_str());
  if (!bf16 && train_flops_per_image.count(c.name))
    std::printf(" gflops=%.1f peak_fraction=%.3f", ips * train_flops_per_image.at(c.name) / 1e9,
                ips * train_flops_per_image.at(c.name) / 1e9 / gemm_rate);
  std::printf("\n");
  for (const auto& [family, ms] : times.family_ms) print_family(c.name, bf16 ? impl + "_bf16" : impl, family, ms);
  std::fflush(stdout);
}

// Runs this program on one model in a process of its own (measure_here, through the hidden
// argument "--alone"), prints its lines and returns its images/s (0 if it printed none).
double run_alone(const ModelCase& c, int threads, const std::string& precision, double gemm_rate) {
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof self - 1) <= 0)
    ptrain::fail("bench_train_step: cannot find its own executable to run ", c.name, " alone");
  const std::string cmd = std::string(self) + " " + std::to_string(threads) + " " + c.name + " " + precision +
                          " --alone " + std::to_string(gemm_rate);
  std::fflush(stdout);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) ptrain::fail("bench_train_step: cannot run itself for ", c.name);
  double ips = 0;
  char line[1024];
  while (std::fgets(line, sizeof line, pipe)) {
    std::fputs(line, stdout);
    if (const char* at = std::strstr(line, " images_per_sec="); at && std::strstr(line, "bench=train_step"))
      ips = std::atof(at + std::strlen(" images_per_sec="));
  }
  if (::pclose(pipe) != 0 || ips == 0) ptrain::fail("bench_train_step: the run of ", c.name, " failed: ", cmd);
  std::fflush(stdout);
  return ips;
}

// Each peer's images/s by model, with its torch version and thread count.
struct PeerRun {
  std::map<std::string, double> images_per_sec, peak_mb;
  std::string torch_version, threads;
};

// mode: "profile" (fp32) or "bf16" (under torch.autocast), each with the kernel families. One peer
// process per model, as ours.
PeerRun run_pytorch(const bench::TorchPeer& peer, int threads, const std::vector<std::string>& models,
                    const char* mode) {
  PeerRun run;
  for (const std::string& model : models)
    for (const std::string& line :
         bench::peer_lines(peer, "torch_peer.py", std::to_string(threads) + " " + model + " " + mode)) {
      if (!bench::json_field(line, "family").empty()) {
        print_family(bench::json_field(line, "model"),
                     "pytorch_" + peer.name + (std::string(mode) == "bf16" ? "_bf16" : ""), bench::json_field(line, "family"),
                     std::atof(bench::json_field(line, "ms_per_step").c_str()));
        continue;
      }
      run.images_per_sec[bench::json_field(line, "model")] =
          std::atof(bench::json_field(line, "images_per_sec").c_str());
      run.peak_mb[bench::json_field(line, "model")] = std::atof(bench::json_field(line, "peak_mb").c_str());
      run.torch_version = bench::json_field(line, "torch");
      run.threads = bench::json_field(line, "threads");
    }
  return run;
}

// Runs each PyTorch peer on `models` (mode as run_pytorch's) and prints its images/s and ptrain's
// ratio to it; tag follows the model in those lines ("" or " precision=bf16").
void compare_with_peers(const std::map<std::string, double>& ours, int threads, const std::vector<std::string>& models,
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

// Precision bf16 (see the top of the file): the models of `cases`, each path in its own process.
int run_bf16(int threads, const std::vector<ModelCase>& cases) {
  if (!ptrain::kernels::cpu_has_bf16_dot()) {
    std::printf("bench=train_step precision=bf16 status=not_measured reason=\"bf16 not measured: no AVX512_BF16/AMX\"\n");
    return 0;
  }
  const double fp32 = gemm_gflops<float>(2048, 5), bf16 = gemm_gflops<ptrain::bfloat16>(2048, 5);
  std::printf("bench=gemm impl=ptrain n=2048 threads=%d fp32_gflops=%.1f bf16_gflops=%.1f bf16_over_fp32=%.3f "
              "bf16_engine=%s float_gemm=%s\n",
              threads, fp32, bf16, bf16 / fp32, ptrain::kernels::cpu_amx_enabled() ? "amx" : "vdpbf16ps",
              std::string(ptrain::kernels::float_gemm_engine()).c_str());
  // path -> model -> images/s; "off": PTRAIN_CPU_BF16=off (bfloat16 computed in float).
  std::map<std::string, std::map<std::string, double>> ips;
  std::vector<std::string> models;
  for (const ModelCase& c : cases) {
    models.push_back(c.name);
    for (const char* path : {"on", "off"}) {
      ::setenv("PTRAIN_CPU_BF16", path, 1);
      ips[path][c.name] = run_alone(c, threads, "bf16", fp32);
    }
    ::unsetenv("PTRAIN_CPU_BF16");
  }
  for (const auto& [model, ours] : ips["on"])
    std::printf("bench=train_step model=%s precision=bf16 ratio_vdpbf16ps_over_widened=%.3f\n", model.c_str(),
                ours / ips["off"][model]);
  compare_with_peers(ips["on"], threads, models, "bf16", " precision=bf16");
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
  std::vector<ModelCase> cases;
  for (const ModelCase& c : model_cases)
    if (only.find(c.name) != std::string::npos) cases.push_back(c);
  if (argc > 5 && std::string(argv[4]) == "--alone") {
    if (cases.size() != 1) ptrain::fail("bench_train_step --alone takes one model, got '", only, "'");
    measure_here(cases.front(), threads, precision, std::atof(argv[5]));
    return 0;
  }
  if (cases.empty()) {
    std::printf("bench=train_step status=not_measured reason=\"no model of %s\"\n", only.c_str());
    return 0;
  }
  if (precision == "bf16") return run_bf16(threads, cases);

  const double peak = gemm_gflops<float>(2048, 5);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("bench=gemm impl=ptrain n=2048 threads=%d gflops=%.1f float_gemm=%s openblas_core=%s OPENBLAS_CORETYPE=%s\n",
              threads, peak, std::string(ptrain::kernels::float_gemm_engine()).c_str(),
              openblas_get_corename ? openblas_get_corename() : "none", coretype ? coretype : "unset");
  std::map<std::string, double> ours;
  std::vector<std::string> models;
  for (const ModelCase& c : cases) {
    models.push_back(c.name);
    ours[c.name] = run_alone(c, threads, "fp32", peak);
  }
  compare_with_peers(ours, threads, models, "profile", "");
  return 0;
}
