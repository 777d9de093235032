#pragma once
// The CPU's optimizer updates over one parameter: Eigen array expressions run a cache-sized
// chunk at a time over the OpenMP threads (the formulas of optim/sgd.hpp and optim/adam.hpp,
// torch.optim 1.13). kernels/optim.hpp sends CpuExecutor here; other executors run the same
// formulas from kernels/indexed/optim.hpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <span>

#include <Eigen/Core>

#include "ptrain/core/half.hpp"

#include "ptrain/kernels/indexed/optim.hpp"

namespace ptrain::kernels::cpu {

// Runs f(begin, length) over [0, n) in cache-sized chunks, spread over the OpenMP threads when
// n is large enough for the fork to pay. Each chunk's arrays stay in L2 between the statements
// of an update, so a multi-statement Eigen update costs about one pass over memory.
inline constexpr std::int64_t update_chunk = 8192;
inline constexpr std::int64_t update_parallel_threshold = 65536;

template <class F>
void for_each_chunk(std::int64_t n, F&& f) {
  const std::int64_t chunks = (n + update_chunk - 1) / update_chunk;
#pragma omp parallel for if (n >= update_parallel_threshold) schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * update_chunk;
    f(begin, std::min(update_chunk, n - begin));
  }
}

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// The chunk [begin, begin + length) of the stepped parameter into copy, rounded, while it is in cache.
template <class T>
void write_rounded(const indexed::SixteenBitCopy& copy, const T* param, std::int64_t begin, std::int64_t length) {
  const auto count = static_cast<std::size_t>(length);
  const std::span<const T> from(param + begin, count);
  if (copy.to_bfloat16) convert(from, std::span<bfloat16>(copy.to_bfloat16 + begin, count));
  if (copy.to_half) convert(from, std::span<half>(copy.to_half + begin, count));
}

// indexed::sgd_step's contract (options: an SgdOptions); the stepped parameter also into rounded.
template <class T, class Options>
void sgd_step(const Options& options, T* param, const T* grad, T* momentum_buffer, bool first_step, std::int64_t n,
              indexed::SixteenBitCopy rounded = {}) {
  indexed::check_sgd_arguments(options, momentum_buffer, n);
  const T lr = static_cast<T>(options.lr);
  const T momentum = static_cast<T>(options.momentum);
  const T keep = static_cast<T>(1 - options.dampening);
  const T decay = static_cast<T>(options.weight_decay);
  ArrayMap<T> p(param, n);
  ConstArrayMap<T> g(grad, n);
  if (options.momentum == 0) {
    for_each_chunk(n, [&](std::int64_t b, std::int64_t m) {
      auto ps = p.segment(b, m);
      if (decay != 0)
        ps -= lr * (g.segment(b, m) + decay * ps);
      else
        ps -= lr * g.segment(b, m);
      write_rounded(rounded, param, b, m);
    });
    return;
  }
  ArrayMap<T> buf(momentum_buffer, n);
  const bool nesterov = options.nesterov;
  // d is an expression of the old p: every statement reads it before p is written.
  auto update = [&](auto ps, const auto& d, auto bs) {
    if (first_step)
      bs = d;
    else
      bs = momentum * bs + keep * d;
    if (nesterov)
      ps -= lr * (d + momentum * bs);
    else
      ps -= lr * bs;
  };
  for_each_chunk(n, [&](std::int64_t b, std::int64_t m) {
    auto ps = p.segment(b, m);
    if (decay != 0)
      update(ps, g.segment(b, m) + decay * ps, buf.segment(b, m));
    else
      update(ps, g.segment(b, m), buf.segment(b, m));
    write_rounded(rounded, param, b, m);
  });
}

// indexed::adam_step's (Decoupled false, options an AdamOptions) and adamw_step's (true,
// an AdamWOptions) contract; the stepped parameter also into rounded.
template <bool Decoupled, class T, class Options>
void adam_step(const Options& options, std::int64_t step, T* param, const T* grad,
               const indexed::AdamBuffers<T>& state, std::int64_t n, indexed::SixteenBitCopy rounded = {}) {
  indexed::check_adam_arguments(Decoupled ? "adamw_step" : "adam_step", options, step, state, n);
  const double t = static_cast<double>(step);
  const T beta1 = static_cast<T>(options.beta1), beta2 = static_cast<T>(options.beta2);
  const T keep1 = static_cast<T>(1 - options.beta1), keep2 = static_cast<T>(1 - options.beta2);
  const T step_size = static_cast<T>(options.lr / (1 - std::pow(options.beta1, t)));
  const T correction2 = static_cast<T>(std::sqrt(1 - std::pow(options.beta2, t)));
  const T eps = static_cast<T>(options.eps);
  const T decay = static_cast<T>(options.weight_decay);
  const T shrink = static_cast<T>(1 - options.lr * options.weight_decay);
  const bool amsgrad = options.amsgrad;

  ArrayMap<T> p(param, n);
  ConstArrayMap<T> g(grad, n);
  ArrayMap<T> m(state.exp_avg, n);
  ArrayMap<T> v(state.exp_avg_sq, n);
  ArrayMap<T> vmax(amsgrad ? state.max_exp_avg_sq : state.exp_avg_sq, n);
  // d is an expression of the old p: the moments read it before p is written.
  auto body = [&](auto ps, const auto& d, auto ms, auto vs, auto vmaxs) {
    ms = beta1 * ms + keep1 * d;
    vs = beta2 * vs + keep2 * d.square();
    if (amsgrad) {
      vmaxs = (vmaxs < vs || vs.isNaN()).select(vs, vmaxs);  // torch.maximum: a NaN on either side stays
      if constexpr (Decoupled)
        ps = ps * shrink - step_size * (ms / (vmaxs.sqrt() / correction2 + eps));
      else
        ps -= step_size * (ms / (vmaxs.sqrt() / correction2 + eps));
    } else {
      if constexpr (Decoupled)
        ps = ps * shrink - step_size * (ms / (vs.sqrt() / correction2 + eps));
      else
        ps -= step_size * (ms / (vs.sqrt() / correction2 + eps));
    }
  };
  for_each_chunk(n, [&](std::int64_t b, std::int64_t k) {
    auto ps = p.segment(b, k);
    if (!Decoupled && decay != 0)
      body(ps, g.segment(b, k) + decay * ps, m.segment(b, k), v.segment(b, k), vmax.segment(b, k));
    else
      body(ps, g.segment(b, k), m.segment(b, k), v.segment(b, k), vmax.segment(b, k));
    write_rounded(rounded, param, b, k);
  });
}

// indexed::unscale_gradients' contract: the cast, the scaling and the inf/NaN check a chunk at a
// time, while the chunk is in cache, over the threads.
template <class From, class To>
void unscale_gradients(const From* grad, To* master_grad, std::int64_t n, double scale, std::int32_t* found_inf) {
  indexed::check_unscale_arguments(n, scale);
  const auto inverse = static_cast<To>(1.0 / scale);
  std::atomic_ref<std::int32_t> found(*found_inf);
  for_each_chunk(n, [&](std::int64_t b, std::int64_t m) {
    const auto count = static_cast<std::size_t>(m);
    convert(std::span<const From>(grad + b, count), std::span<To>(master_grad + b, count));
    ArrayMap<To> g(master_grad + b, m);
    if (inverse != To(1)) g *= inverse;
    if (!std::isfinite(g.abs().template maxCoeff<Eigen::PropagateNaN>())) found.store(1, std::memory_order_relaxed);
  });
}

}  // namespace ptrain::kernels::cpu
