#pragma once
// Executor-generic losses and their reductions (the GPU side of autograd/ops/loss.hpp and
// accuracy.hpp): fused cross-entropy with label smoothing (kernels/cpu/cross_entropy.hpp),
// binary cross-entropy with logits, mean squared error, argmax and top-1 counts. Scores are
// [outer, C, inner] with one target per position (o, k), as kernels::ReductionLayout around the
// classes. Targets are checked on the host before (detail::class_layout): kernels trust them.
#include <cstdint>
#include <limits>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/broadcast.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"
#include "ptrain/kernels/indexed/softmax.hpp"
#include "ptrain/kernels/geometry/layout.hpp"

namespace ptrain::kernels::indexed {

// Per position: the log-sum-exp of the scores and, for label smoothing, their sum.
template <class A>
struct LseAndSum {
  MaxSumExp<A> lse;
  A sum;
};

// lse[row] = L and loss[row] = L - (1 - eps) x_t - eps / C sum_c x_c for each position.
template <class T>
struct CrossEntropyRows {
  using A = accumulate_t<T>;
  using accumulator = LseAndSum<A>;
  const T* x;
  const std::int64_t* targets;
  ReductionLayout l;
  double eps;
  A* lse;
  double* loss;
  PTRAIN_HOST_DEVICE accumulator identity() const { return {MaxSumExp<A>::empty(), A(0)}; }
  PTRAIN_HOST_DEVICE accumulator term(std::int64_t row, std::int64_t c) const {
    const A v = to_accumulate(x[row_element(l, row, c)]);
    return {MaxSumExp<A>::of(v), v};
  }
  PTRAIN_HOST_DEVICE accumulator combine(accumulator a, accumulator b) const {
    return {MaxSumExp<A>::combine(a.lse, b.lse), a.sum + b.sum};
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, accumulator total) const {
    const A L = total.lse.log_sum_exp();
    lse[row] = L;
    double value = static_cast<double>(L) - (1.0 - eps) * load_double(x, row_element(l, row, targets[row]));
    if (eps != 0.0) value -= eps / static_cast<double>(l.n) * static_cast<double>(total.sum);
    loss[row] = value;
  }
};

inline void check_class_layout(const ReductionLayout& l, double eps, const char* op) {
  check(l.outer >= 0 && l.n > 0 && l.inner >= 1, op, ": bad layout [outer ", l.outer, ", classes ", l.n, ", inner ",
        l.inner, "] (expected at least one class)");
  check(eps >= 0.0 && eps <= 1.0, op, ": label smoothing ", eps, " is outside [0, 1]");
}

// Writes L for every position into lse ([outer * inner]) and out[0] = R(factor * the summed
// loss): kernels::cross_entropy_forward, which returns the sum (factor 1; 1 / positions gives
// the op's mean). out is the executor's pointer: a GPU run does not wait for it.
template <class T, class R, class Ex>
void cross_entropy_forward(const Ex& ex, const T* x, const std::int64_t* targets, accumulate_t<T>* lse,
                           const ReductionLayout& l, double eps, double factor, R* out) {
  check_class_layout(l, eps, "cross_entropy_forward");
  const std::int64_t positions = l.outer * l.inner;
  auto loss = ex.template buffer<double>(positions > 0 ? positions : 1);
  reduce_rows(ex, positions, l.n, CrossEntropyRows<T>{x, targets, l, eps, lse, loss.data()}, rows_contiguous(l));
  sum_terms(ex, positions, LoadDouble<double>{loss.data()}, factor, out);
}

// gx = scale * (exp(x - L) - eps / C - (1 - eps) [c == t]).
template <class T>
struct CrossEntropyGrad {
  using A = accumulate_t<T>;
  const T* x;
  const std::int64_t* targets;
  const A* lse;
  A scale, on_target, per_class;
  T* gx;
  ReductionLayout l;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    using std::exp;
    const std::int64_t row = row_of(l, i), c = (i / l.inner) % l.n;
    A g = (exp(to_accumulate(x[i]) - lse[row]) - per_class) * scale;
    if (c == targets[row]) g -= on_target;
    gx[i] = from_accumulate<T>(g);
  }
};

// gx = scale * dloss/dx from x and the forward's L: kernels::cross_entropy_backward (scale is
// the op's grad_scale * incoming gradient / positions).
template <class T, class Ex>
void cross_entropy_backward(const Ex& ex, const T* x, const std::int64_t* targets, const accumulate_t<T>* lse,
                            accumulate_t<T> scale, T* gx, const ReductionLayout& l, double eps) {
  check_class_layout(l, eps, "cross_entropy_backward");
  using A = accumulate_t<T>;
  const A on_target = static_cast<A>(1.0 - eps) * scale;
  const A per_class = static_cast<A>(eps / static_cast<double>(l.n));
  ex.indexed(l.numel(), CrossEntropyGrad<T>{x, targets, lse, scale, on_target, per_class, gx, l});
}

// The positive-class weight of element i (1 without one).
template <class T>
struct PosWeight {
  const T* pw;
  BroadcastIndex at;
  PTRAIN_HOST_DEVICE accumulate_t<T> operator()(std::int64_t i) const {
    return pw ? to_accumulate(pw[at(i)]) : accumulate_t<T>(1);
  }
};

template <class T>
struct BceLoss {
  const T* x;
  const T* t;
  PosWeight<T> pw;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t i) const {
    return static_cast<double>(BceWithLogits{}.loss(to_accumulate(x[i]), to_accumulate(t[i]), pw(i)));
  }
};

// out[0] = R(factor * sum of BceWithLogits' loss over n elements), pos_weight (null: none)
// broadcast by pos_weight_at: binary_cross_entropy_with_logits' forward (factor 1 / n).
template <class T, class R, class Ex>
void bce_with_logits_sum(const Ex& ex, const T* x, const T* t, const T* pos_weight,
                         const BroadcastIndex& pos_weight_at, std::int64_t n, double factor, R* out) {
  sum_terms(ex, n, BceLoss<T>{x, t, PosWeight<T>{pos_weight, pos_weight_at}}, factor, out);
}

template <class T>
struct BceGrads {
  using A = accumulate_t<T>;
  const T* x;
  const T* t;
  PosWeight<T> pw;
  A g;
  T* gx;
  T* gt;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const A xi = to_accumulate(x[i]), ti = to_accumulate(t[i]), w = pw(i);
    if (gx) gx[i] = from_accumulate<T>(g * BceWithLogits{}.grad_logit(xi, ti, w));
    if (gt) gt[i] = from_accumulate<T>(g * BceWithLogits{}.grad_target(xi, ti, w));
  }
};

// gx = g * dloss/dx and gt = g * dloss/dt (either may be null): binary_cross_entropy_with_logits'
// backward, g the incoming gradient / n.
template <class T, class Ex>
void bce_with_logits_backward(const Ex& ex, const T* x, const T* t, const T* pos_weight,
                              const BroadcastIndex& pos_weight_at, std::int64_t n, accumulate_t<T> g, T* gx, T* gt) {
  ex.indexed(n, BceGrads<T>{x, t, PosWeight<T>{pos_weight, pos_weight_at}, g, gx, gt});
}

template <class T>
struct SquaredDifference {
  const T* a;
  const T* b;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t i) const {
    const double d = static_cast<double>(to_accumulate(a[i]) - to_accumulate(b[i]));
    return d * d;
  }
};

// out[0] = R(factor * sum((pred - target)^2)): mse_loss' forward (factor 1 / n). Its backward is
// elementwise (ScaledDifference).
template <class T, class R, class Ex>
void mse_sum(const Ex& ex, const T* pred, const T* target, std::int64_t n, double factor, R* out) {
  sum_terms(ex, n, SquaredDifference<T>{pred, target}, factor, out);
}

// The largest score so far and its class; ties go to the smaller class and a NaN is the largest
// score, as torch.argmax.
template <class A>
struct MaxAt {
  A value;
  std::int64_t index;
};
template <class T>
struct ArgmaxRows {
  using A = accumulate_t<T>;
  using accumulator = MaxAt<A>;
  const T* scores;
  ReductionLayout l;
  std::int64_t* best;
  PTRAIN_HOST_DEVICE accumulator identity() const {
    return {-std::numeric_limits<A>::infinity(), std::numeric_limits<std::int64_t>::max()};
  }
  PTRAIN_HOST_DEVICE accumulator term(std::int64_t row, std::int64_t c) const {
    return {to_accumulate(scores[row_element(l, row, c)]), c};
  }
  PTRAIN_HOST_DEVICE accumulator combine(accumulator a, accumulator b) const {
    return ranks_above(b.value, a.value) || (!ranks_above(a.value, b.value) && b.index < a.index) ? b : a;
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, accumulator total) const { best[row] = total.index; }
};

// best[position] = the class of the largest score (the first on ties): argmax_classes.
template <class T, class Ex>
void argmax_classes(const Ex& ex, const T* scores, const ReductionLayout& l, std::int64_t* best) {
  check_class_layout(l, 0.0, "argmax_classes");
  reduce_rows(ex, l.outer * l.inner, l.n, ArgmaxRows<T>{scores, l, best}, rows_contiguous(l));
}

struct Matches {
  const std::int64_t* a;
  const std::int64_t* b;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t i) const { return a[i] == b[i] ? 1.0 : 0.0; }
};

// count[0] = how many positions have their largest score at the target class: top1_correct.
template <class T, class Ex>
void top1_correct(const Ex& ex, const T* scores, const std::int64_t* targets, const ReductionLayout& l,
                  std::int64_t* count) {
  const std::int64_t positions = l.outer * l.inner;
  auto best = ex.template buffer<std::int64_t>(positions > 0 ? positions : 1);
  argmax_classes(ex, scores, l, best.data());
  sum_terms(ex, positions, Matches{best.data(), targets}, 1.0, count);
}

// x[i] *= factor[0], factor a one-element tensor in the executor's memory (the incoming gradient
// of a scalar loss, which stays there).
template <class T>
struct MultiplyByScalarAt {
  T* x;
  const T* factor;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    x[i] = from_accumulate<T>(to_accumulate(x[i]) * to_accumulate(factor[0]));
  }
};

// The log-probability at each position's target (nll_loss' terms).
template <class T>
struct TargetEntry {
  const T* x;
  const std::int64_t* targets;
  ReductionLayout l;
  PTRAIN_HOST_DEVICE double operator()(std::int64_t row) const { return load_double(x, row_element(l, row, targets[row])); }
};
// gx at each position's target = factor * g[0]; one thread per position, each writing its own element.
template <class T>
struct TargetGrad {
  T* gx;
  const std::int64_t* targets;
  ReductionLayout l;
  const T* g;
  double factor;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t row) const {
    gx[row_element(l, row, targets[row])] =
        from_accumulate<T>(static_cast<accumulate_t<T>>(factor * static_cast<double>(to_accumulate(g[0]))));
  }
};

// out[i] = factor * g[0] * (a[i] - b[i]): mse_loss' gradient, g[0] the incoming one.
template <class T>
struct ScaledDifferenceAt {
  const T* a;
  const T* b;
  const T* g;
  accumulate_t<T> factor;
  T* out;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    out[i] = from_accumulate<T>(factor * to_accumulate(g[0]) * (to_accumulate(a[i]) - to_accumulate(b[i])));
  }
};

}  // namespace ptrain::kernels::indexed
