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

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double gemm_gflops(std::int64_t n, int repeats) {
  ptrain::Tensor<float> a = ptrain::Tensor<float>::full({n, n}, 0.5f), b = a.clone(), c({n, n});
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    ptrain::kernels::gemm<float>(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return 2.0 * double(n) * n * n / median(times) / 1e9;
}

// The timed steps' median, their kernel families' self time (the OpProfile of the timed steps:
// timing each kernel call costs two clock reads) and the rest, autograd and allocation, in ms per step.
struct StepTimes {
  double median_seconds = 0;
  std::map<std::string, double> family_ms;
};

// classes: of the targets; per_pixel: one target per output pixel (segmentation).
template <class Model>
StepTimes time_steps(Model& model, ptrain::Shape input_shape, int warmup, int steps, int classes = 10,
                     bool per_pixel = false) {
  ptrain::Rng rng(0);
  ptrain::Tensor<float> x(input_shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
  const std::int64_t targets = per_pixel ? input_shape[0] * input_shape[2] * input_shape[3] : input_shape[0];
  std::vector<std::int64_t> y(static_cast<std::size_t>(targets));
  for (auto& t : y) t = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
  ptrain::Sgd<float> sgd(model.parameters(), {.lr = 0.01, .momentum = 0.9});
  std::vector<double> times;
  ptrain::OpProfile profile;
  for (int i = 0; i < warmup + steps; ++i) {
    std::optional<ptrain::OpProfileScope> profiling;
    if (i >= warmup) profiling.emplace(profile);
    const auto start = Clock::now();
    model.zero_grad();
    ptrain::backward(ptrain::cross_entropy(model.forward(ptrain::Var<float>(x)), y));
    {
      ptrain::NoGradGuard no_grad;
      sgd.step();
    }
    if (i >= warmup) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  StepTimes result{.median_seconds = median(times)};
  double total_ms = 0;
  for (double t : times) total_ms += 1e3 * t / steps;
  for (const auto& [family, time] : profile.families()) result.family_ms[family] = time.self_us / 1e3 / steps;
  result.family_ms["autograd_and_allocation"] = total_ms - profile.self_us() / 1e3 / steps;
  return result;
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
  std::printf("bench=train_step model=%s impl=ptrain threads=%d batch=%lld median_ms=%.2f images_per_sec=%.2f",
              name.c_str(), threads, static_cast<long long>(batch), 1e3 * seconds, ours[name]);
  if (train_flops_per_image.count(name))
    std::printf(" gflops=%.1f peak_fraction=%.3f", ours[name] * train_flops_per_image.at(name) / 1e9,
                ours[name] * train_flops_per_image.at(name) / 1e9 / peak);
  std::printf("\n");
  for (const auto& [family, ms] : times.family_ms) print_family(name, "ptrain", family, ms);
  std::fflush(stdout);
}

// Each peer's images/s by model, with its torch version and thread count.
struct PeerRun {
  std::map<std::string, double> images_per_sec;
  std::string torch_version, threads;
};

PeerRun run_pytorch(const bench::TorchPeer& peer, int threads, const std::string& models) {
  PeerRun run;
  for (const std::string& line :
       bench::peer_lines(peer, "torch_peer.py", std::to_string(threads) + " " + models + " profile")) {
    if (!bench::json_field(line, "family").empty()) {
      print_family(bench::json_field(line, "model"), "pytorch_" + peer.name, bench::json_field(line, "family"),
                   std::atof(bench::json_field(line, "ms_per_step").c_str()));
      continue;
    }
    run.images_per_sec[bench::json_field(line, "model")] = std::atof(bench::json_field(line, "images_per_sec").c_str());
    run.torch_version = bench::json_field(line, "torch");
    run.threads = bench::json_field(line, "threads");
  }
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::string only = argc > 2 ? argv[2] : "small_cnn,resnet18_cifar,resnet50_cifar,vgg16_128,unet_128";
  ptrain::set_num_threads(threads);
  ptrain::manual_seed(0);

  const double peak = gemm_gflops(2048, 5);
  std::printf("bench=gemm impl=ptrain n=2048 threads=%d gflops=%.1f\n", threads, peak);

  std::map<std::string, double> ours;
  const auto wanted = [&](const char* name) { return only.find(name) != std::string::npos; };
  if (wanted("small_cnn")) {
    ptrain::SmallCnn<float> net;
    report(ours, "small_cnn", threads, 128, time_steps(net, {128, 1, 28, 28}, 3, 20), peak);
  }
  if (wanted("resnet18_cifar")) {
    auto net = ptrain::resnet18<float>({.num_classes = 10, .cifar_stem = true});
    report(ours, "resnet18_cifar", threads, 64, time_steps(*net, {64, 3, 32, 32}, 2, 8), peak);
  }
  if (wanted("resnet50_cifar")) {
    auto net = ptrain::resnet50<float>({.num_classes = 10, .cifar_stem = true});
    report(ours, "resnet50_cifar", threads, 64, time_steps(*net, {64, 3, 32, 32}, 1, 4), peak);
  }
  if (wanted("vgg16_128")) {
    auto net = ptrain::vgg16<float>({.num_classes = 3});
    report(ours, "vgg16_128", threads, 16, time_steps(*net, {16, 3, 128, 128}, 1, 4, 3), peak);
  }
  if (wanted("unet_128")) {
    ptrain::UNet<float> net({.in_channels = 3, .classes = 2, .levels = 5, .base_width = 16});
    report(ours, "unet_128", threads, 16, time_steps(net, {16, 3, 128, 128}, 1, 4, 2, true), peak);
  }

  for (const bench::TorchPeer& peer : bench::torch_peers()) {
    const PeerRun torch = run_pytorch(peer, threads, only);
    if (torch.images_per_sec.empty()) {
      bench::print_unavailable("train_step", peer);
      continue;
    }
    for (const auto& [model, ips] : torch.images_per_sec) {
      std::printf("bench=train_step model=%s impl=pytorch_%s torch=%s threads=%s images_per_sec=%.1f\n", model.c_str(),
                  peer.name.c_str(), torch.torch_version.c_str(), torch.threads.c_str(), ips);
      if (ours.count(model))
        std::printf("bench=train_step model=%s ratio_ptrain_over_pytorch_%s=%.3f\n", model.c_str(), peer.name.c_str(),
                    ours[model] / ips);
    }
  }
  return 0;
}
