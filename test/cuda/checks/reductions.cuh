#pragma once
// Device checks: the reduction-shaped kernels of kernels/indexed/ (batch norm, softmax, losses,
// sums) run by the CudaExecutor on device copies and by the HostExecutor on the host copies.
#include <algorithm>
#include <string>
#include <vector>

#include <ptrain/kernels/cuda/executor.cuh>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/batch_norm.hpp>
#include <ptrain/kernels/indexed/loss.hpp>
#include <ptrain/kernels/indexed/reduce.hpp>
#include <ptrain/kernels/indexed/softmax.hpp>

#include "checks/common.cuh"

namespace ptrain::device_checks {

namespace reductions_detail {

// A host buffer and its device copy, run through the same algorithm on each side.
template <class T>
struct Both {
  Tensor<T> host;
  Tensor<T, Cuda> device;
  explicit Both(Tensor<T> h) : host(std::move(h)), device(host.template to<Cuda>()) {}
  explicit Both(std::int64_t n) : Both(Tensor<T>::zeros(Shape{n})) {}
  T* h() { return host.data(); }
  T* d() { return device.data(); }
  void expect_same(double tol, const std::string& what) const { expect_close(device, host, tol, what); }
};

inline std::vector<std::int64_t> class_targets(std::int64_t n, std::int64_t classes, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (auto& v : t) v = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
  return t;
}

template <class T>
void check_batch_norm(const kernels::ChannelLayout& l, const std::string& t, double tol) {
  namespace ix = kernels::indexed;
  const kernels::HostExecutor host;
  const kernels::CudaExecutor gpu;
  const std::int64_t C = l.channels;
  const std::string shape = " [" + std::to_string(l.outer) + ", " + std::to_string(C) + ", " +
                            std::to_string(l.inner) + "]" + t;
  Both<T> x(signed_values<T>(Shape{l.numel()}, 101, 3, 7)), gy(signed_values<T>(Shape{l.numel()}, 102));
  Both<T> w(signed_values<T>(Shape{C}, 103, 0.5, 1.5)), b(signed_values<T>(Shape{C}, 104));
  Both<T> y(l.numel()), gx(l.numel());
  Both<double> mean(C), var(C), invstd(C), s1(C), s2(C);
  ix::batch_norm_forward_training(host, x.h(), l, w.h(), b.h(), 1e-5, y.h(), mean.h(), var.h());
  ix::batch_norm_forward_training(gpu, x.d(), l, w.d(), b.d(), 1e-5, y.d(), mean.d(), var.d());
  y.expect_same(tol, "batch norm training forward" + shape);
  mean.expect_same(1e-9, "batch norm mean" + shape);
  var.expect_same(1e-9, "batch norm variance" + shape);
  ix::batch_norm_moments(gpu, x.d(), l, mean.d(), var.d());
  mean.expect_same(1e-9, "batch_norm_moments mean" + shape);
  var.expect_same(1e-9, "batch_norm_moments variance" + shape);
  ix::batch_norm_invstd(host, var.h(), C, 1e-5, invstd.h());
  ix::batch_norm_invstd(gpu, var.d(), C, 1e-5, invstd.d());
  ix::batch_norm_forward_inference(host, x.h(), l, w.h(), b.h(), mean.h(), invstd.h(), y.h());
  ix::batch_norm_forward_inference(gpu, x.d(), l, w.d(), b.d(), mean.d(), invstd.d(), y.d());
  y.expect_same(tol, "batch norm inference forward" + shape);
  ix::batch_norm_backward(host, x.h(), gy.h(), l, w.h(), mean.h(), invstd.h(), true, gx.h(), s1.h(), s2.h());
  ix::batch_norm_backward(gpu, x.d(), gy.d(), l, w.d(), mean.d(), invstd.d(), true, gx.d(), s1.d(), s2.d());
  gx.expect_same(tol, "batch norm backward gx" + shape);
  s1.expect_same(1e-9 * static_cast<double>(l.count()), "batch norm backward sum(gy)" + shape);
  s2.expect_same(1e-9 * static_cast<double>(l.count()), "batch norm backward sum(gy * xhat)" + shape);
  ix::batch_norm_backward_sums(host, x.h(), gy.h(), l, mean.h(), s1.h(), s2.h());
  ix::batch_norm_backward_sums(gpu, x.d(), gy.d(), l, mean.d(), s1.d(), s2.d());
  s2.expect_same(1e-9 * static_cast<double>(l.count()), "batch_norm_backward_sums" + shape);
  ix::batch_norm_backward_input(host, x.h(), gy.h(), l, w.h(), mean.h(), invstd.h(), s1.h(), s2.h(), 2.0 * l.count(),
                                gx.h());
  ix::batch_norm_backward_input(gpu, x.d(), gy.d(), l, w.d(), mean.d(), invstd.d(), s1.d(), s2.d(), 2.0 * l.count(),
                                gx.d());
  gx.expect_same(tol, "batch_norm_backward_input" + shape);
  Both<T> rm(signed_values<T>(Shape{C}, 105)), rv(signed_values<T>(Shape{C}, 106, 0.5, 2));
  ix::batch_norm_update_running(host, mean.h(), var.h(), C, 0.1, 2.0 * l.count(), rm.h(), rv.h());
  ix::batch_norm_update_running(gpu, mean.d(), var.d(), C, 0.1, 2.0 * l.count(), rm.d(), rv.d());
  rm.expect_same(tol, "batch norm running mean" + shape);
  rv.expect_same(tol, "batch norm running variance" + shape);
}

template <class T>
void check_softmax_and_cross_entropy(const kernels::ReductionLayout& l, const std::string& t, double tol) {
  namespace ix = kernels::indexed;
  const kernels::HostExecutor host;
  const kernels::CudaExecutor gpu;
  const std::string shape = " [" + std::to_string(l.outer) + ", " + std::to_string(l.n) + ", " +
                            std::to_string(l.inner) + "]" + t;
  const std::int64_t positions = l.outer * l.inner;
  Both<T> x(signed_values<T>(Shape{l.numel()}, 111, -4, 4)), g(signed_values<T>(Shape{l.numel()}, 112));
  Both<T> y(l.numel()), gx(l.numel());
  for (bool take_log : {false, true}) {
    const std::string op = take_log ? "log_softmax" : "softmax";
    ix::softmax_forward(host, x.h(), y.h(), l, take_log);
    ix::softmax_forward(gpu, x.d(), y.d(), l, take_log);
    y.expect_same(tol, op + " forward" + shape);
    ix::softmax_backward(host, y.h(), g.h(), gx.h(), l, take_log);
    ix::softmax_backward(gpu, y.d(), g.d(), gx.d(), l, take_log);
    gx.expect_same(tol, op + " backward" + shape);
  }
  const auto targets = class_targets(positions, l.n, 113);
  Both<std::int64_t> t_index(Tensor<std::int64_t>::from(Shape{positions}, targets));
  Both<accumulate_t<T>> lse(positions);
  Both<double> total(1);
  ix::cross_entropy_forward(host, x.h(), t_index.h(), lse.h(), l, 0.1, 1.0, total.h());
  ix::cross_entropy_forward(gpu, x.d(), t_index.d(), lse.d(), l, 0.1, 1.0, total.d());
  lse.expect_same(1e-4, "cross entropy log-sum-exp" + shape);
  total.expect_same(std::max(tol, 1e-9) * static_cast<double>(positions), "cross entropy summed loss" + shape);
  ix::cross_entropy_backward(host, x.h(), t_index.h(), lse.h(), accumulate_t<T>(0.5), gx.h(), l, 0.1);
  ix::cross_entropy_backward(gpu, x.d(), t_index.d(), lse.d(), accumulate_t<T>(0.5), gx.d(), l, 0.1);
  gx.expect_same(tol, "cross entropy gradient" + shape);
  Both<std::int64_t> best(positions), correct(1);
  ix::argmax_classes(host, x.h(), l, best.h());
  ix::argmax_classes(gpu, x.d(), l, best.d());
  best.expect_same(0, "argmax" + shape);
  ix::top1_correct(host, x.h(), t_index.h(), l, correct.h());
  ix::top1_correct(gpu, x.d(), t_index.d(), l, correct.d());
  correct.expect_same(0, "top-1 count" + shape);
}

template <class T>
void check_sums(const std::string& t, double tol) {
  namespace ix = kernels::indexed;
  const kernels::HostExecutor host;
  const kernels::CudaExecutor gpu;
  const std::int64_t rows = 513, cols = 1031, n = rows * cols;
  Both<T> x(signed_values<T>(Shape{n}, 121)), target(signed_values<T>(Shape{n}, 122, 0, 1));
  Both<T> out(1);
  ix::sum_all(host, x.h(), n, 1.0 / n, out.h());
  ix::sum_all(gpu, x.d(), n, 1.0 / n, out.d());
  out.expect_same(tol, "mean of " + std::to_string(n) + " elements" + t);
  Both<T> columns(cols), channels(cols);
  ix::column_sums(host, x.h(), rows, cols, columns.h());
  ix::column_sums(gpu, x.d(), rows, cols, columns.d());
  columns.expect_same(tol * 30, "column sums" + t);
  const kernels::ChannelLayout l{3, cols, 171};
  ix::channel_sums(host, x.h(), l, channels.h());
  ix::channel_sums(gpu, x.d(), l, channels.d());
  channels.expect_same(tol * 30, "channel sums" + t);
  Both<T> pw(signed_values<T>(Shape{cols}, 123, 0.5, 2));
  const kernels::BroadcastIndex pw_at(Shape{cols}, Shape{rows, cols}, "check");
  ix::bce_with_logits_sum(host, x.h(), target.h(), pw.h(), pw_at, n, 1.0 / n, out.h());
  ix::bce_with_logits_sum(gpu, x.d(), target.d(), pw.d(), pw_at, n, 1.0 / n, out.d());
  out.expect_same(tol, "bce with logits mean" + t);
  Both<T> gx(n), gt(n);
  ix::bce_with_logits_backward(host, x.h(), target.h(), pw.h(), pw_at, n, accumulate_t<T>(1), gx.h(), gt.h());
  ix::bce_with_logits_backward(gpu, x.d(), target.d(), pw.d(), pw_at, n, accumulate_t<T>(1), gx.d(), gt.d());
  gx.expect_same(tol, "bce with logits logit gradient" + t);
  gt.expect_same(tol, "bce with logits target gradient" + t);
  ix::mse_sum(host, x.h(), target.h(), n, 1.0 / n, out.h());
  ix::mse_sum(gpu, x.d(), target.d(), n, 1.0 / n, out.d());
  out.expect_same(tol, "mse" + t);
}

template <class T>
void check_reductions(const char* type, double tol) {
  const std::string t = std::string(" (") + type + ")";
  check_batch_norm<T>({32, 64, 28 * 28}, t, tol);  // a block per channel
  check_batch_norm<T>({256, 512, 1}, t, tol);      // [N, C]: a thread per channel
  check_softmax_and_cross_entropy<T>({256, 1000, 1}, t, tol);  // classification rows
  check_softmax_and_cross_entropy<T>({4, 21, 4096}, t, tol);   // per-pixel classes
  check_softmax_and_cross_entropy<T>({2, 3000, 7}, t, tol);    // long strided rows
  check_sums<T>(t, tol);
}

}  // namespace reductions_detail

inline void check_reductions() {
  reductions_detail::check_reductions<float>("float", 1e-5);
  reductions_detail::check_reductions<double>("double", 1e-12);
  // Absolute tolerances: a flipped rounding of a gradient near 8 is 4e-3 in half, 3e-2 in bfloat16.
  reductions_detail::check_reductions<half>("half", 1e-2);
  reductions_detail::check_reductions<bfloat16>("bfloat16", 6e-2);
}

}  // namespace ptrain::device_checks
