// Forward and backward GFLOP/s of conv2d on the convolutions of ResNet-18 on CIFAR-10 (batch 64),
// float, through the autograd op. Best of `reps` runs; wall time and process CPU time, the latter
// for a machine shared with other work.
// Then, per 3x3 stride-1 layer of ResNet-18 on CIFAR-10 (batch 64), VGG-16 at 128x128 (batch 16)
// and bench_train_step's UNet (widths 16..256, 128x128, batch 16), each pass's median ms by each algorithm of kernels/cpu/conv_algorithm.hpp (forced), and
// the ratio of im2col + GEMM's time to each Winograd's, one line per layer and pass:
//   bench=conv_algorithms net=... layer=... pass=forward|grad_input|grad_weight gemm_ms=...
//     winograd2_ms=... winograd4_ms=... speedup_winograd2=... speedup_winograd4=... fastest=... auto=...
//   (auto=: what the default, PTRAIN_CONV_ALGO=auto, runs for that pass)
//
//   conv_bench [threads=2] [reps=10] [algorithm reps=3] [nets=resnet18_cifar,vgg16_128,unet_128]
//
// The PyTorch figures to compare with (oneDNN), same layers and thread count:
//   /usr/bin/python3 -c "import torch,time; torch.set_num_threads(2); c=torch.nn.Conv2d(64,64,3,padding=1,bias=False);
//     x=torch.randn(64,64,32,32,requires_grad=True); y=c(x); g=torch.randn_like(y); ..."
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/kernels/cpu/conv.hpp>

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ptrain::Tensor<float> random(const ptrain::Shape& shape, ptrain::Rng& rng) {
  ptrain::Tensor<float> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(rng.uniform(-1, 1));
  return t;
}

void bench(const char* name, std::int64_t c, std::int64_t k, std::int64_t hw, std::int64_t kernel,
           std::int64_t stride, std::int64_t pad, bool input_grad, int reps) {
  using namespace ptrain;
  Rng rng(1);
  Var<float> x(random({64, c, hw, hw}, rng), input_grad), w(random({k, c, kernel, kernel}, rng), true);
  const Conv2dOptions options = Conv2dOptions::square(stride, pad);
  const double flops = conv2d_geometry(x.shape(), w.shape(), options).flops();
  const double backward_flops = input_grad ? 2 * flops : flops;
  double fwd = 1e9, bwd = 1e9, fwd_cpu = 1e9, bwd_cpu = 1e9;
  for (int r = 0; r < reps + 2; ++r) {  // two warm-up runs
    const double t0 = wall_seconds(), c0 = cpu_seconds();
    Var<float> y = conv2d(x, w, {}, options);
    const double t1 = wall_seconds(), c1 = cpu_seconds();
    backward(y, Tensor<float>::ones(y.shape()));
    const double t2 = wall_seconds(), c2 = cpu_seconds();
    x.zero_grad();
    w.zero_grad();
    if (r < 2) continue;
    fwd = std::min(fwd, t1 - t0);
    bwd = std::min(bwd, t2 - t1);
    fwd_cpu = std::min(fwd_cpu, c1 - c0);
    bwd_cpu = std::min(bwd_cpu, c2 - c1);
  }
  std::printf("%-28s fwd %7.2f ms %6.1f GF/s  bwd %7.2f ms %6.1f GF/s  total %6.1f GF/s  (%.1f GF per CPU-second)\n",
              name, fwd * 1e3, flops / fwd * 1e-9, bwd * 1e3, backward_flops / bwd * 1e-9,
              (flops + backward_flops) / (fwd + bwd) * 1e-9, (flops + backward_flops) / (fwd_cpu + bwd_cpu) * 1e-9);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One 3x3 stride-1 layer: each pass timed with each algorithm forced, median of `reps` after a
// warm-up run.
void compare_algorithms(const char* net, std::int64_t batch, std::int64_t c, std::int64_t k, std::int64_t hw,
                        bool input_grad, int reps) {
  using namespace ptrain;
  namespace kn = ptrain::kernels;
  Rng rng(2);
  const Tensor<float> x = random({batch, c, hw, hw}, rng), w = random({k, c, 3, 3}, rng),
                      gy = random({batch, k, hw, hw}, rng);
  Tensor<float> y({batch, k, hw, hw}), gx(x.shape()), gw(w.shape());
  const kn::Conv2dGeometry g = kn::make_conv2d_geometry(x.shape(), w.shape(), 1, 1, 1, 1, 1, 1, 1);
  struct Pass {
    const char* name;
    kn::ConvPass pass;
  };
  std::vector<Pass> passes{{"forward", kn::ConvPass::forward}, {"grad_weight", kn::ConvPass::grad_weight}};
  if (input_grad) passes.push_back({"grad_input", kn::ConvPass::grad_input});
  const std::string layer = std::to_string(c) + "->" + std::to_string(k) + "_" + std::to_string(hw) + "x" +
                            std::to_string(hw);
  for (const Pass& pass : passes) {
    double ms[3] = {};
    for (std::size_t a = 0; a < kn::conv_algorithm_candidates.size(); ++a) {
      kn::set_conv_algorithm(kn::conv_algorithm_candidates[a]);
      std::vector<double> times;
      for (int r = 0; r < reps + 1; ++r) {
        const double t0 = wall_seconds();
        if (pass.pass == kn::ConvPass::forward)
          kn::conv2d_forward<float>(g, x.data(), w.data(), nullptr, y.data());
        else if (pass.pass == kn::ConvPass::grad_weight)
          kn::conv2d_backward<float>(g, x.data(), nullptr, gy.data(), nullptr, gw.data(), nullptr);
        else
          kn::conv2d_backward<float>(g, nullptr, w.data(), gy.data(), gx.data(), nullptr, nullptr);
        if (r > 0) times.push_back(wall_seconds() - t0);
      }
      ms[a] = median(times) * 1e3;
    }
    const char* names[3] = {"gemm", "winograd2", "winograd4"};
    const std::size_t fastest = static_cast<std::size_t>(std::min_element(ms, ms + 3) - ms);
    std::printf("bench=conv_algorithms net=%s layer=%s batch=%lld pass=%s gemm_ms=%.2f winograd2_ms=%.2f "
                "winograd4_ms=%.2f speedup_winograd2=%.2f speedup_winograd4=%.2f fastest=%s auto=%s\n",
                net, layer.c_str(), static_cast<long long>(batch), pass.name, ms[0], ms[1], ms[2], ms[0] / ms[1],
                ms[0] / ms[2], names[fastest], names[static_cast<int>(kn::default_conv_algorithm(g, pass.pass)) - 1]);
    std::fflush(stdout);
  }
  kn::set_conv_algorithm(kn::ConvAlgorithm::automatic);
}

}  // namespace

int main(int argc, char** argv) {
  ptrain::set_num_threads(argc > 1 ? std::atoi(argv[1]) : 2);
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  std::printf("threads %d, batch 64, float\n", ptrain::num_threads());
  bench("stem 3->64 32x32 (no dx)", 3, 64, 32, 3, 1, 1, false, reps);
  bench("64->64 32x32 3x3", 64, 64, 32, 3, 1, 1, true, reps);
  bench("64->128 32x32 3x3 s2", 64, 128, 32, 3, 2, 1, true, reps);
  bench("64->128 32x32 1x1 s2", 64, 128, 32, 1, 2, 0, true, reps);
  bench("128->128 16x16 3x3", 128, 128, 16, 3, 1, 1, true, reps);
  bench("256->256 8x8 3x3", 256, 256, 8, 3, 1, 1, true, reps);
  bench("512->512 4x4 3x3", 512, 512, 4, 3, 1, 1, true, reps);

  const int algorithm_reps = argc > 3 ? std::atoi(argv[3]) : 3;
  const std::string nets = argc > 4 ? argv[4] : "resnet18_cifar,vgg16_128,unet_128";
  const auto wanted = [&](const char* net) { return nets.find(net) != std::string::npos; };
  std::printf("bench=conv_algorithms threads=%d reps=%d scalar=float\n", ptrain::num_threads(), algorithm_reps);
  // ResNet-18 on CIFAR-10: the stem and each stage's stride-1 3x3 convolutions.
  if (wanted("resnet18_cifar")) {
    compare_algorithms("resnet18_cifar", 64, 3, 64, 32, false, algorithm_reps);
    for (const std::int64_t width : {64, 128, 256, 512})
      compare_algorithms("resnet18_cifar", 64, width, width, 32 * 64 / width, true, algorithm_reps);
  }
  // VGG-16 at 128x128: every convolution (all 3x3 stride 1, pad 1), each shape once.
  struct Layer {
    std::int64_t c, k, hw;
  };
  if (wanted("vgg16_128"))
    for (const Layer& l : {Layer{3, 64, 128}, Layer{64, 64, 128}, Layer{64, 128, 64}, Layer{128, 128, 64},
                           Layer{128, 256, 32}, Layer{256, 256, 32}, Layer{256, 512, 16}, Layer{512, 512, 16},
                           Layer{512, 512, 8}})
      compare_algorithms("vgg16_128", 16, l.c, l.k, l.hw, l.c > 3, algorithm_reps);
  // The UNet: its double convolutions' layers, encoder then decoder (whose first layer takes the
  // skip connection and the up-sampled map concatenated), each shape once.
  if (wanted("unet_128"))
    for (const Layer& l : {Layer{3, 16, 128}, Layer{16, 16, 128}, Layer{16, 32, 64}, Layer{32, 32, 64},
                           Layer{32, 64, 32}, Layer{64, 64, 32}, Layer{64, 128, 16}, Layer{128, 128, 16},
                           Layer{128, 256, 8}, Layer{256, 256, 8}, Layer{256, 128, 16}, Layer{128, 64, 32},
                           Layer{64, 32, 64}, Layer{32, 16, 128}})
      compare_algorithms("unet_128", 16, l.c, l.k, l.hw, l.c > 3, algorithm_reps);
}
