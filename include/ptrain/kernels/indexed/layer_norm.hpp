#pragma once
// Executor-generic layer norm over rows of length n (the normalised trailing dimensions): row
// reductions for each row's mean and 1 / sqrt(var + eps) (two passes, the variance about the
// mean), an indexed kernel for y; backward two sums per row and an indexed kernel for gx. The
// weight and bias gradients are column sums (kernels/reduce.hpp) of g * xhat and g.
#include <cmath>
#include <cstdint>

#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/kernels/indexed/reduce.hpp"

namespace ptrain::kernels::indexed {

// mean[row] = sum_j x / n.
template <class T>
struct RowMean : SumReduction<accumulate_t<T>> {
  using A = accumulate_t<T>;
  const T* x;
  std::int64_t n;
  A* mean;
  PTRAIN_HOST_DEVICE A term(std::int64_t row, std::int64_t j) const { return to_accumulate(x[row * n + j]); }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, A total) const { mean[row] = total / static_cast<A>(n); }
};
// rstd[row] = 1 / sqrt(sum_j (x - mean)^2 / n + eps): the biased variance, as torch.layer_norm.
template <class T>
struct RowInverseStd : SumReduction<accumulate_t<T>> {
  using A = accumulate_t<T>;
  const T* x;
  std::int64_t n;
  const A* mean;
  A eps;
  A* rstd;
  PTRAIN_HOST_DEVICE A term(std::int64_t row, std::int64_t j) const {
    const A d = to_accumulate(x[row * n + j]) - mean[row];
    return d * d;
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, A total) const {
    using std::sqrt;
    rstd[row] = A(1) / sqrt(total / static_cast<A>(n) + eps);
  }
};
// y = (x - mean) * rstd * w + b, w and b per column (null: 1 and 0).
template <class T>
struct LayerNormApply {
  using A = accumulate_t<T>;
  const T* x;
  const A* mean;
  const A* rstd;
  const T* w;
  const T* b;
  std::int64_t n;
  T* y;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t row = i / n, c = i - row * n;
    A v = (to_accumulate(x[i]) - mean[row]) * rstd[row];
    if (w) v *= to_accumulate(w[c]);
    if (b) v += to_accumulate(b[c]);
    y[i] = from_accumulate<T>(v);
  }
};

// y = layer_norm(x) over rows [rows, n]; mean and rstd (rows each, accumulate_t<T>) kept for
// backward: kernels::layer_norm_forward.
template <class T, class Ex>
void layer_norm_forward(const Ex& ex, const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t n,
                        double eps, T* y, accumulate_t<T>* mean, accumulate_t<T>* rstd) {
  if (rows * n == 0) return;
  using A = accumulate_t<T>;
  reduce_rows(ex, rows, n, RowMean<T>{{}, x, n, mean}, true);
  reduce_rows(ex, rows, n, RowInverseStd<T>{{}, x, n, mean, static_cast<A>(eps), rstd}, true);
  ex.indexed(rows * n, LayerNormApply<T>{x, mean, rstd, w, b, n, y});
}

// The two sums of gx per row: sum_j g w and sum_j g w xhat.
template <class A>
struct SumPair {
  A g, g_xhat;
};
template <class T>
struct LayerNormBackwardSums {
  using A = accumulate_t<T>;
  using accumulator = SumPair<A>;
  const T* x;
  const T* g;
  const T* w;
  const A* mean;
  const A* rstd;
  std::int64_t n;
  A* sum_g;
  A* sum_g_xhat;
  PTRAIN_HOST_DEVICE accumulator identity() const { return {A(0), A(0)}; }
  PTRAIN_HOST_DEVICE accumulator term(std::int64_t row, std::int64_t j) const {
    const std::int64_t i = row * n + j;
    const A gw = to_accumulate(g[i]) * (w ? to_accumulate(w[j]) : A(1));
    return {gw, gw * (to_accumulate(x[i]) - mean[row]) * rstd[row]};
  }
  PTRAIN_HOST_DEVICE accumulator combine(accumulator a, accumulator b) const {
    return {a.g + b.g, a.g_xhat + b.g_xhat};
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t row, accumulator total) const {
    sum_g[row] = total.g;
    sum_g_xhat[row] = total.g_xhat;
  }
};
// gx = rstd * (g w - mean_j(g w) - xhat * mean_j(g w xhat)) and g * xhat (the terms of the
// weight's gradient, summed over rows by column_sums); either output may be null.
template <class T>
struct LayerNormBackwardApply {
  using A = accumulate_t<T>;
  const T* x;
  const T* g;
  const T* w;
  const A* mean;
  const A* rstd;
  const A* sum_g;
  const A* sum_g_xhat;
  std::int64_t n;
  T* gx;
  T* g_xhat;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t row = i / n, c = i - row * n;
    const A gi = to_accumulate(g[i]);
    const A xhat = (to_accumulate(x[i]) - mean[row]) * rstd[row];
    if (g_xhat) g_xhat[i] = from_accumulate<T>(gi * xhat);
    if (!gx) return;
    const A gw = gi * (w ? to_accumulate(w[c]) : A(1));
    const A inv_n = A(1) / static_cast<A>(n);
    gx[i] = from_accumulate<T>(rstd[row] * (gw - sum_g[row] * inv_n - xhat * sum_g_xhat[row] * inv_n));
  }
};

// gx (null: not wanted) from x, the incoming gradient g, the weight (null: none) and the forward's
// mean and rstd; g_xhat (null: not wanted) gets g * xhat for the weight's gradient.
template <class T, class Ex>
void layer_norm_backward(const Ex& ex, const T* x, const T* g, const T* w, const accumulate_t<T>* mean,
                         const accumulate_t<T>* rstd, std::int64_t rows, std::int64_t n, T* gx, T* g_xhat) {
  if (rows * n == 0 || (!gx && !g_xhat)) return;
  using A = accumulate_t<T>;
  auto sum_g = ex.template buffer<A>(gx ? rows : 0);
  auto sum_g_xhat = ex.template buffer<A>(gx ? rows : 0);
  if (gx)
    reduce_rows(ex, rows, n, LayerNormBackwardSums<T>{x, g, w, mean, rstd, n, sum_g.data(), sum_g_xhat.data()}, true);
  ex.indexed(rows * n,
             LayerNormBackwardApply<T>{x, g, w, mean, rstd, sum_g.data(), sum_g_xhat.data(), n, gx, g_xhat});
}

}  // namespace ptrain::kernels::indexed
