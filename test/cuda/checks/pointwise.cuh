#pragma once
// Device checks: kernels/indexed/elementwise.hpp and kernels/indexed/optim.hpp under the
// CudaExecutor against the same calls under the HostExecutor; Lamb on the device against the CPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <ptrain/kernels/indexed/elementwise.hpp>
#include <ptrain/kernels/indexed/optim.hpp>
#include <ptrain/optim/lamb.hpp>

#include "checks/common.cuh"

namespace ptrain::device_checks {

namespace pointwise {

namespace ki = kernels::indexed;
inline const kernels::HostExecutor host;

// A host tensor and its device copy, run through the same call.
template <class T>
struct Pair {
  Tensor<T> h;
  Tensor<T, Cuda> d;
  explicit Pair(const Tensor<T>& t) : h(t.clone()), d(t.template to<Cuda>()) {}
  explicit Pair(const Shape& shape) : Pair(Tensor<T>::zeros(shape)) {}
  void expect_same(double tol, const std::string& what) const { expect_close(d, h, tol, what); }
};

template <class T>
Tensor<T> inputs(const Shape& shape, std::uint64_t seed, double lo = -2, double hi = 2) {
  return tensor_cast<T>(signed_values<double>(shape, seed, lo, hi));
}

template <class T>
void check_maps(const char* type, double tol) {
  using A = accumulate_t<T>;
  const kernels::CudaExecutor dev;
  const std::string t = std::string(" (") + type + ")";
  const Shape shape{(std::int64_t(1) << 20) + 3};  // several grid-stride rounds
  const std::int64_t n = shape.numel();
  Pair<T> x(inputs<T>(shape, 1)), g(inputs<T>(shape, 2)), y(shape);

  auto both = [&](auto run, double tolerance, const std::string& what) {
    run(host, x.h.data(), g.h.data(), y.h.data());
    run(dev, x.d.data(), g.d.data(), y.d.data());
    y.expect_same(tolerance, what + t);
  };
  both([&](const auto& ex, const T* a, const T*, T* out) { ki::map(ex, a, out, n, kernels::Relu{}); }, 0, "relu");
  both([&](const auto& ex, const T* a, const T*, T* out) { ki::map(ex, a, out, n, kernels::Sigmoid{}); }, tol,
       "sigmoid");
  both([&](const auto& ex, const T* a, const T* b, T* out) { ki::map2(ex, a, b, out, n, kernels::ReluBackward{}); },
       0, "relu backward");
  both([&](const auto& ex, const T* a, const T* b, T* out) { ki::map2(ex, a, b, out, n, kernels::Axpy<A>{A(0.5)}); },
       tol, "axpy");
  const kernels::DropoutApply<A, A> dropout{{12345, std::uint64_t(1) << 30}, A(1 / 0.75)};
  both([&](const auto& ex, const T* a, const T*, T* out) { ki::map_indexed(ex, a, out, n, dropout); }, tol,
       "dropout");

  // Bias over [N, C, HW] (conv) and [rows, cols] (linear).
  Pair<T> b(inputs<T>({37}, 3)), conv(inputs<T>({5, 37, 61}, 4)), lin(inputs<T>({301, 37}, 5));
  ki::add_bias(host, conv.h.data(), b.h.data(), 5, 37, 61);
  ki::add_bias(dev, conv.d.data(), b.d.data(), 5, 37, 61);
  conv.expect_same(tol, "conv bias add" + t);
  ki::add_bias(host, lin.h.data(), b.h.data(), 301, 37, 1);
  ki::add_bias(dev, lin.d.data(), b.d.data(), 301, 37, 1);
  lin.expect_same(tol, "linear bias add" + t);

  // Concat of [4, c, 9, 7] along channels, and back.
  const std::vector<std::int64_t> blocks{3 * 63, 1 * 63, 5 * 63};
  Pair<T> p0(inputs<T>({4 * blocks[0]}, 6)), p1(inputs<T>({4 * blocks[1]}, 7)), p2(inputs<T>({4 * blocks[2]}, 8));
  Pair<T> cat(Shape{4 * (blocks[0] + blocks[1] + blocks[2])});
  const std::vector<const T*> hx{p0.h.data(), p1.h.data(), p2.h.data()}, dx{p0.d.data(), p1.d.data(), p2.d.data()};
  ki::concat(host, hx, blocks, cat.h.data(), 4);
  ki::concat(dev, dx, blocks, cat.d.data(), 4);
  cat.expect_same(0, "concat" + t);
  Pair<T> g0(Shape{4 * blocks[0]}), g2(Shape{4 * blocks[2]});
  const std::vector<T*> hg{g0.h.data(), nullptr, g2.h.data()}, dg{g0.d.data(), nullptr, g2.d.data()};
  ki::concat_backward(host, cat.h.data(), blocks, hg, 4);
  ki::concat_backward(dev, cat.d.data(), blocks, dg, 4);
  g0.expect_same(0, "concat backward, input 0" + t);
  g2.expect_same(0, "concat backward, input 2" + t);

  ki::fill(host, y.h.data(), n - 1, A(0.75));
  ki::fill(dev, y.d.data(), n - 1, A(0.75));
  y.expect_same(0, "fill" + t);
}

template <class From, class To>
void check_cast() {
  const kernels::CudaExecutor dev;
  Tensor<From> src = inputs<From>({100003}, 9, -7e4, 7e4);
  src[0] = static_cast<From>(std::numeric_limits<float>::infinity());
  src[1] = static_cast<From>(1e-7);  // subnormal in half
  const Tensor<From, Cuda> src_d = src.template to<Cuda>();
  Pair<To> dst(src.shape());
  ki::cast(host, src.data(), dst.h.data(), src.numel());
  ki::cast(dev, src_d.data(), dst.d.data(), src.numel());
  const std::vector<To> got = dst.d.to_vector();  // bit for bit: the values include infinities
  std::int64_t at = -1;
  for (std::int64_t i = 0; i < src.numel() && at < 0; ++i)
    if (std::memcmp(&got[static_cast<std::size_t>(i)], &dst.h[i], sizeof(To)) != 0) at = i;
  expect(at < 0, std::string("cast ") + scalar_name<From> + " -> " + scalar_name<To> + " matches the host bit for bit" +
                     (at < 0 ? "" : " (first mismatch at element " + std::to_string(at) + ")"));
}

template <class T>
void check_optimizers(const char* type, double tol) {
  const kernels::CudaExecutor dev;
  const std::string t = std::string(" (") + type + ")";
  const std::int64_t n = 300007;
  Pair<T> p(inputs<T>({n}, 10)), buf(Shape{n}), m(Shape{n}), v(Shape{n}), vmax(Shape{n});
  for (int step = 1; step <= 3; ++step) {
    const Pair<T> g(inputs<T>({n}, 20 + step));
    const SgdOptions sgd{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2, .nesterov = true};
    ki::sgd_step(host, sgd, p.h.data(), g.h.data(), buf.h.data(), step == 1, n);
    ki::sgd_step(dev, sgd, p.d.data(), g.d.data(), buf.d.data(), step == 1, n);
    const AdamOptions adam{.lr = 1e-2, .weight_decay = 1e-3, .amsgrad = true};
    ki::adam_step(host, adam, step, p.h.data(), g.h.data(), {m.h.data(), v.h.data(), vmax.h.data()}, n);
    ki::adam_step(dev, adam, step, p.d.data(), g.d.data(), {m.d.data(), v.d.data(), vmax.d.data()}, n);
    const AdamWOptions adamw{.lr = 1e-2};
    ki::adamw_step(host, adamw, step, p.h.data(), g.h.data(), {m.h.data(), v.h.data()}, n);
    ki::adamw_step(dev, adamw, step, p.d.data(), g.d.data(), {m.d.data(), v.d.data()}, n);
  }
  p.expect_same(tol, "SGD, Adam and AdamW steps: parameters" + t);
  buf.expect_same(tol, "SGD momentum buffer" + t);
  m.expect_same(tol, "Adam exp_avg" + t);
  v.expect_same(tol, "Adam exp_avg_sq" + t);
  vmax.expect_same(tol, "Adam max_exp_avg_sq" + t);
}

// Lamb<T, Cuda> against Lamb<T> over three steps: a large weight, a LayerNorm weight (no weight
// decay) and a zero parameter (trust ratio 1).
template <class T>
void check_lamb(const char* type, double tol) {
  const std::vector<std::pair<std::string, Shape>> shapes{
      {"encoder.weight", Shape{300007}}, {"encoder.LayerNorm.weight", Shape{77}}, {"zero.weight", Shape{5}}};
  std::vector<std::pair<std::string, Var<T>>> cpu;
  std::vector<std::pair<std::string, Var<T, Cuda>>> dev;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Tensor<T> init = i == 2 ? Tensor<T>::zeros(shapes[i].second) : inputs<T>(shapes[i].second, 40 + i);
    cpu.emplace_back(shapes[i].first, Var<T>(init.clone(), true));
    dev.emplace_back(shapes[i].first, Var<T, Cuda>(init.template to<Cuda>(), true));
  }
  const LambOptions options{.lr = 1e-2, .weight_decay = 1e-2};
  Lamb<T> cpu_lamb(cpu, options);
  Lamb<T, Cuda> dev_lamb(dev, options);
  for (int step = 1; step <= 3; ++step) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const Tensor<T> g = inputs<T>(shapes[i].second, 100 * step + i);
      cpu[i].second.grad() = g.clone();
      dev[i].second.grad() = g.template to<Cuda>();
    }
    cpu_lamb.step();
    dev_lamb.step();
  }
  for (std::size_t i = 0; i < shapes.size(); ++i)
    expect_close(dev[i].second.value(), cpu[i].second.value(), tol,
                 "Lamb steps: " + shapes[i].first + " (" + type + ")");
}

// 16-bit gradients into float masters, unscaled, with an inf or NaN found in a late row.
template <class T>
void check_unscale(const char* type, double poison) {
  const kernels::CudaExecutor dev;
  const std::string t = std::string(" (") + type + ", injected " + std::to_string(poison) + ")";
  const std::int64_t n = 5 * ki::unscale_row + 11;
  Tensor<T> grad = inputs<T>({n}, 30, -6e4, 6e4);
  grad[n - 3] = static_cast<T>(poison);
  const Tensor<T, Cuda> grad_d = grad.template to<Cuda>();
  Pair<float> master(Shape{n});
  Pair<std::int32_t> flag(Shape{1});
  ki::unscale_gradients(host, grad.data(), master.h.data(), n, 1024.0, flag.h.data());
  ki::unscale_gradients(dev, grad_d.data(), master.d.data(), n, 1024.0, flag.d.data());
  // The poisoned element compares unequal to itself: zero it on both sides first.
  master.h[n - 3] = 0;
  ki::fill(dev, master.d.data() + n - 3, 1, 0.0f);
  master.expect_same(0, "unscaled gradients" + t);
  flag.expect_same(0, "found-inf flag" + t);
  expect(flag.h[0] == (std::isfinite(poison) ? 0 : 1), "found-inf flag is raised exactly for inf or NaN" + t);
}

}  // namespace pointwise

inline void check_pointwise() {
  using namespace pointwise;
  check_maps<float>("float", 1e-6);
  check_maps<half>("half", 1e-3);
  check_maps<bfloat16>("bfloat16", 8e-3);
  check_cast<float, half>();
  check_cast<float, bfloat16>();
  check_cast<half, float>();
  check_cast<bfloat16, float>();
  check_cast<double, half>();
  check_cast<half, bfloat16>();
  check_cast<double, float>();
  check_optimizers<float>("float", 1e-5);
  check_optimizers<double>("double", 1e-12);
  check_lamb<float>("float", 1e-5);
  check_lamb<double>("double", 1e-12);
  for (double poison : {0.5, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    check_unscale<half>("half", poison);
    check_unscale<bfloat16>("bfloat16", poison);
  }
}

}  // namespace ptrain::device_checks
