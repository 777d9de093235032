#pragma once
// Executor-generic optimizer steps over one parameter (the formulas of optim/sgd.hpp, optim/adam.hpp
// (torch.optim 1.13) and optim/lamb.hpp) and mixed precision's gradient unscaling with its inf/NaN
// check (parallel/mixed_precision.hpp). Masters become 16-bit weights with indexed/elementwise.hpp's cast.
#include <cmath>
#include <cstdint>
#include <limits>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/indexed.hpp"

namespace ptrain::kernels::indexed {

// Where an optimizer update also writes the parameters it stepped, rounded to 16 bits: mixed
// precision's model weights, written from the masters in the same pass (at most one is set; both
// null: nowhere). kernels/optim.hpp's dispatch points take it.
struct SixteenBitCopy {
  half* to_half = nullptr;
  bfloat16* to_bfloat16 = nullptr;
};

// One SGD step of element i; buffer is null without momentum.
template <class T>
struct SgdUpdate {
  using A = accumulate_t<T>;
  T* param;
  const T* grad;
  T* buffer;
  A lr, momentum, keep, weight_decay;  // keep = 1 - dampening
  bool nesterov, first;                // first: the buffer starts as the gradient

  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const A p = to_accumulate(param[i]);
    A d = to_accumulate(grad[i]);
    if (weight_decay != A(0)) d = d + weight_decay * p;
    if (buffer) {
      const A b = first ? d : momentum * to_accumulate(buffer[i]) + keep * d;
      buffer[i] = from_accumulate<T>(b);
      d = nesterov ? d + momentum * b : b;
    }
    param[i] = from_accumulate<T>(p - lr * d);
  }
};

// Adam's per-parameter state; max_exp_avg_sq only with amsgrad (else null).
template <class T>
struct AdamBuffers {
  T* exp_avg;
  T* exp_avg_sq;
  T* max_exp_avg_sq = nullptr;
};

// One Adam/AdamW step of element i. The bias corrections come from the host: step_size =
// lr / (1 - beta1^t), correction2 = sqrt(1 - beta2^t). Adam: l2 = weight_decay, shrink = 1;
// AdamW: l2 = 0, shrink = 1 - lr * weight_decay.
template <class T>
struct AdamUpdate {
  using A = accumulate_t<T>;
  T* param;
  const T* grad;
  AdamBuffers<T> state;
  A beta1, beta2, keep1, keep2, step_size, correction2, eps, l2, shrink;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    using std::sqrt;
    const A p = to_accumulate(param[i]);
    A d = to_accumulate(grad[i]);
    if (l2 != A(0)) d = d + l2 * p;
    const A m = beta1 * to_accumulate(state.exp_avg[i]) + keep1 * d;
    A v = beta2 * to_accumulate(state.exp_avg_sq[i]) + keep2 * (d * d);
    state.exp_avg[i] = from_accumulate<T>(m);
    state.exp_avg_sq[i] = from_accumulate<T>(v);
    if (state.max_exp_avg_sq) {
      const A old = to_accumulate(state.max_exp_avg_sq[i]);
      v = old < v || v != v ? v : old;  // torch.maximum: a NaN on either side stays
      state.max_exp_avg_sq[i] = from_accumulate<T>(v);
    }
    param[i] = from_accumulate<T>(p * shrink - step_size * (m / (sqrt(v) / correction2 + eps)));
  }
};

// Sgd<T, D>::step for one parameter of n elements. options: an SgdOptions (optim/sgd.hpp); the
// momentum buffer is needed when options.momentum != 0, and first_step says it is new.
template <class Options, class T>
void check_sgd_arguments(const Options& options, const T* momentum_buffer, std::int64_t n) {
  check(n >= 0, "sgd_step: negative element count ", n);
  check(options.momentum == 0 || momentum_buffer, "sgd_step: momentum ", options.momentum,
        " needs a momentum buffer, got none");
}
template <class Ex, class T, class Options>
void sgd_step(const Ex& ex, const Options& options, T* param, const T* grad, T* momentum_buffer, bool first_step,
              std::int64_t n) {
  using A = accumulate_t<T>;
  check_sgd_arguments(options, momentum_buffer, n);
  const bool momentum = options.momentum != 0;
  ex.indexed(n, SgdUpdate<T>{param, grad, momentum ? momentum_buffer : nullptr, static_cast<A>(options.lr),
                             static_cast<A>(options.momentum), static_cast<A>(1 - options.dampening),
                             static_cast<A>(options.weight_decay), options.nesterov, first_step});
}

// What adam_step and adamw_step (and the CPU's, kernels/cpu/optim.hpp) require of their arguments.
template <class Options, class T>
void check_adam_arguments(const char* name, const Options& options, std::int64_t step, const AdamBuffers<T>& state,
                          std::int64_t n) {
  check(n >= 0, name, ": negative element count ", n);
  check(step >= 1, name, ": step count ", step, ", expected the parameter's step number, starting at 1");
  check(state.exp_avg && state.exp_avg_sq, name, ": exp_avg and exp_avg_sq are needed");
  check(!options.amsgrad || state.max_exp_avg_sq, name, ": amsgrad needs max_exp_avg_sq, got none");
}

namespace detail {
template <class Ex, class T, class Options>
void adam_like_step(const Ex& ex, const char* name, bool decoupled, const Options& options, std::int64_t step,
                    T* param, const T* grad, const AdamBuffers<T>& state, std::int64_t n) {
  using A = accumulate_t<T>;
  check_adam_arguments(name, options, step, state, n);
  const double t = static_cast<double>(step);
  AdamBuffers<T> used = state;
  if (!options.amsgrad) used.max_exp_avg_sq = nullptr;
  ex.indexed(n, AdamUpdate<T>{param, grad, used, static_cast<A>(options.beta1), static_cast<A>(options.beta2),
                              static_cast<A>(1 - options.beta1), static_cast<A>(1 - options.beta2),
                              static_cast<A>(options.lr / (1 - std::pow(options.beta1, t))),
                              static_cast<A>(std::sqrt(1 - std::pow(options.beta2, t))), static_cast<A>(options.eps),
                              static_cast<A>(decoupled ? 0.0 : options.weight_decay),
                              static_cast<A>(decoupled ? 1 - options.lr * options.weight_decay : 1.0)});
}
}  // namespace detail

// Adam<T, D>'s update of one parameter at its step number `step` (1 on its first step, with zeroed
// state). options: an AdamOptions (optim/adam.hpp).
template <class Ex, class T, class Options>
void adam_step(const Ex& ex, const Options& options, std::int64_t step, T* param, const T* grad,
               const AdamBuffers<T>& state, std::int64_t n) {
  detail::adam_like_step(ex, "adam_step", false, options, step, param, grad, state, n);
}
// AdamW<T, D>'s: options is an AdamWOptions (decoupled weight decay).
template <class Ex, class T, class Options>
void adamw_step(const Ex& ex, const Options& options, std::int64_t step, T* param, const T* grad,
                const AdamBuffers<T>& state, std::int64_t n) {
  detail::adam_like_step(ex, "adamw_step", true, options, step, param, grad, state, n);
}

// LAMB's per-parameter state and the scratch of its trust ratio, all in the executor's memory:
// update holds the parameter's elements, norms 3 doubles (the sums of squares of the parameter and
// of the update, then the trust ratio).
template <class T>
struct LambBuffers {
  T* exp_avg;
  T* exp_avg_sq;
  T* update;
  double* norms;
};

// LAMB's moments and its Adam-style update of element i (before the trust ratio):
//   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2,
//   update = m / (1 - beta1^t) / (sqrt(v) / sqrt(1 - beta2^t) + eps) + weight_decay p.
template <class T>
struct LambMoments {
  using A = accumulate_t<T>;
  const T* param;
  const T* grad;
  LambBuffers<T> state;
  A beta1, beta2, keep1, keep2, correction1, correction2, eps, weight_decay;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    using std::sqrt;
    const A d = to_accumulate(grad[i]);
    const A m = beta1 * to_accumulate(state.exp_avg[i]) + keep1 * d;
    const A v = beta2 * to_accumulate(state.exp_avg_sq[i]) + keep2 * (d * d);
    state.exp_avg[i] = from_accumulate<T>(m);
    state.exp_avg_sq[i] = from_accumulate<T>(v);
    A u = m / correction1 / (sqrt(v) / correction2 + eps);
    if (weight_decay != A(0)) u = u + weight_decay * to_accumulate(param[i]);
    state.update[i] = from_accumulate<T>(u);
  }
};

// The layer's trust ratio ||p|| / ||update|| from the two sums of squares, 1 when either norm is 0
// (as in You et al.'s reference and NVIDIA's FusedLAMB): one element's work.
struct LambTrustRatio {
  double* norms;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t) const {
    using std::sqrt;
    const double weight = sqrt(norms[0]), update = sqrt(norms[1]);
    norms[2] = weight > 0 && update > 0 ? weight / update : 1.0;
  }
};

// p = p - lr * trust * update.
template <class T>
struct LambApply {
  using A = accumulate_t<T>;
  T* param;
  const T* update;
  const double* norms;
  double lr;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const A step = static_cast<A>(lr * norms[2]);
    param[i] = from_accumulate<T>(to_accumulate(param[i]) - step * to_accumulate(update[i]));
  }
};

// What lamb_step (kernels/optim.hpp) requires of its arguments.
template <class T>
void check_lamb_arguments(std::int64_t step, double weight_decay, const LambBuffers<T>& state, std::int64_t n) {
  check(n >= 0, "lamb_step: negative element count ", n);
  check(step >= 1, "lamb_step: step count ", step, ", expected the parameter's step number, starting at 1");
  check(state.exp_avg && state.exp_avg_sq && state.update && state.norms,
        "lamb_step: exp_avg, exp_avg_sq, the update scratch and the norms are needed");
  check(weight_decay >= 0 && std::isfinite(weight_decay), "lamb_step: weight decay ", weight_decay,
        ", expected a finite value >= 0");
}

// The elementwise passes of a LAMB step; the two sums of squares between them are
// kernels/reduce.hpp's (kernels/optim.hpp's lamb_step runs the whole step).
template <class Ex, class T, class Options>
void lamb_moments(const Ex& ex, const Options& options, std::int64_t step, double weight_decay, const T* param,
                  const T* grad, const LambBuffers<T>& state, std::int64_t n) {
  using A = accumulate_t<T>;
  check_lamb_arguments(step, weight_decay, state, n);
  const double t = static_cast<double>(step);
  ex.indexed(n, LambMoments<T>{param, grad, state, static_cast<A>(options.beta1), static_cast<A>(options.beta2),
                               static_cast<A>(1 - options.beta1), static_cast<A>(1 - options.beta2),
                               static_cast<A>(1 - std::pow(options.beta1, t)),
                               static_cast<A>(std::sqrt(1 - std::pow(options.beta2, t))),
                               static_cast<A>(options.eps), static_cast<A>(weight_decay)});
}
template <class Ex, class T>
void lamb_apply(const Ex& ex, double lr, T* param, const LambBuffers<T>& state, std::int64_t n) {
  ex.indexed(1, LambTrustRatio{state.norms});
  ex.indexed(n, LambApply<T>{param, state.update, state.norms, lr});
}

// Rows of this many elements are one GPU block's share of the unscale-and-check pass.
inline constexpr std::int64_t unscale_row = 16384;

// dst[k] = src[k] * inverse, folded per row into "was any result inf or NaN"; a row that saw one
// sets *found_inf to 1 (every writer writes the same value, so no atomics are needed).
template <class From, class To>
struct UnscaleCheck {
  using accumulator = int;
  using A = accumulate_t<To>;
  const From* src;
  To* dst;
  std::int64_t n;
  A inverse;
  std::int32_t* found_inf;

  PTRAIN_HOST_DEVICE int identity() const { return 0; }
  PTRAIN_HOST_DEVICE int combine(int a, int b) const { return a | b; }
  PTRAIN_HOST_DEVICE int term(std::int64_t row, std::int64_t j) const {
    using std::abs;
    const std::int64_t k = row * unscale_row + j;
    if (k >= n) return 0;
    const A a = static_cast<A>(to_accumulate(src[k])) * inverse;
    dst[k] = from_accumulate<To>(a);
    return abs(a) <= std::numeric_limits<A>::max() ? 0 : 1;  // false for inf and NaN
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t, int any) const {
    if (any) *found_inf = 1;
  }
};

// MixedPrecision::before_optimizer_step for one parameter: its (16-bit) gradient into the
// master's, times 1 / scale (src may equal dst to unscale in place). *found_inf becomes 1 when a
// result is inf or NaN and is never cleared here: zero it once per step, check it after the
// last parameter.
inline void check_unscale_arguments(std::int64_t n, double scale) {
  check(n >= 0, "unscale_gradients: negative element count ", n);
  check(std::isfinite(scale) && scale > 0, "unscale_gradients: loss scale ", scale, ", expected a positive number");
}
template <class Ex, class From, class To>
void unscale_gradients(const Ex& ex, const From* grad, To* master_grad, std::int64_t n, double scale,
                       std::int32_t* found_inf) {
  check_unscale_arguments(n, scale);
  const auto inverse = static_cast<accumulate_t<To>>(1.0 / scale);
  ex.row_reduction((n + unscale_row - 1) / unscale_row, unscale_row,
                   UnscaleCheck<From, To>{grad, master_grad, n, inverse, found_inf});
}

}  // namespace ptrain::kernels::indexed
