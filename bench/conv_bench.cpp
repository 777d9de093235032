// Forward and backward GFLOP/s of conv2d on the convolutions of ResNet-18 on CIFAR-10 (batch 64),
// float, through the autograd op. Best of `reps` runs; wall time and process CPU time, the latter
// for a machine shared with other work.
//
//   conv_bench [threads=2] [reps=10]
//
// The PyTorch figures to compare with (oneDNN), same layers and thread count:
//   /usr/bin/python3 -c "import torch,time; torch.set_num_threads(2); c=torch.nn.Conv2d(64,64,3,padding=1,bias=False);
//     x=torch.randn(64,64,32,32,requires_grad=True); y=c(x); g=torch.randn_like(y); ..."
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/core/rng.hpp>

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
}
