// What fusing batch norm with relu (and the residual add) saves: one training forward and
// backward of relu(batch_norm(x) + residual) as three ops against batch_norm_add_relu (and
// relu(batch_norm(x)) against batch_norm_relu), on ResNet-18 CIFAR's layer shapes at batch 64,
// the two alternating; the median of `rounds` per variant and their ratio.
//
//   bench_batch_norm_relu [threads=2] [rounds=15]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>
#include <ptrain/device/threads.hpp>

namespace {

using ptrain::Shape;
using ptrain::Tensor;
using ptrain::Var;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Layer {
  Var<float> x, residual, weight, bias;
  Tensor<float> running_mean, running_var, gy;
};

Layer layer(const Shape& shape) {
  const std::int64_t C = shape[1];
  const auto f = [](const Tensor<double>& t) { return ptrain::tensor_cast<float>(t); };
  return {Var<float>(f(ptrain::random_tensor(shape, 1, -2, 3)), true),
          Var<float>(f(ptrain::random_tensor(shape, 2)), true),
          Var<float>(f(ptrain::random_tensor({C}, 3, 0.5, 1.5)), true),
          Var<float>(f(ptrain::random_tensor({C}, 4)), true),
          Tensor<float>::zeros({C}),
          Tensor<float>::ones({C}),
          f(ptrain::random_tensor(shape, 5))};
}

// Milliseconds of one forward and backward, fused or as the unfused ops.
double step_ms(Layer& l, bool fused, bool with_residual) {
  for (Var<float>* v : {&l.x, &l.residual, &l.weight, &l.bias}) v->zero_grad();
  const auto start = std::chrono::steady_clock::now();
  Var<float> y;
  if (fused)
    y = with_residual ? batch_norm_add_relu(l.x, l.residual, l.weight, l.bias, l.running_mean, l.running_var, true)
                      : batch_norm_relu(l.x, l.weight, l.bias, l.running_mean, l.running_var, true);
  else {
    const Var<float> z = batch_norm(l.x, l.weight, l.bias, l.running_mean, l.running_var, true);
    y = relu(with_residual ? add(z, l.residual) : z);
  }
  backward(y, l.gy.clone());
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  ptrain::set_num_threads(threads);
  for (const Shape& shape : {Shape{64, 64, 32, 32}, Shape{64, 128, 16, 16}, Shape{64, 256, 8, 8}, Shape{64, 512, 4, 4}})
    for (bool with_residual : {false, true}) {
      Layer l = layer(shape);
      std::vector<double> unfused, fused;
      step_ms(l, false, with_residual);  // warm-up: first-touch of the buffers
      step_ms(l, true, with_residual);
      for (int r = 0; r < rounds; ++r) {
        unfused.push_back(step_ms(l, false, with_residual));
        fused.push_back(step_ms(l, true, with_residual));
      }
      const double u = median(unfused), f = median(fused);
      std::printf("bench=batch_norm_relu shape=%lldx%lldx%lldx%lld residual=%d threads=%d unfused_ms=%.3f fused_ms=%.3f "
                  "ratio_unfused_over_fused=%.3f\n",
                  static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), static_cast<long long>(shape[2]),
                  static_cast<long long>(shape[3]), with_residual ? 1 : 0, threads, u, f, u / f);
    }
  return 0;
}
