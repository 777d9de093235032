#pragma once
// Gradient clipping by global norm, torch.nn.utils.clip_grad_norm_: the L2 norm over every
// parameter's gradient, and when max_norm / (norm + 1e-6) is below 1 each gradient times it.
// TrainerOptions::clip_grad_norm applies it to the gradients the optimizer steps, after the
// policies' before_optimizer_step: data-parallel gradients already averaged, mixed precision's
// unscaled into the fp32 masters (a step that overflowed is skipped, not clipped, as GradScaler's
// recipe). A model cut into pipeline stages holds each gradient on one stage only, and Sharded ranks
// each their own parameters' by then: sum_over_parts adds those ranks' squared norms, so every rank
// clips by the whole model's norm (replicas hold the same averaged gradients and are not summed over;
// a parameter several stages hold a copy of is counted on one of them).
//
//   const double norm = clip_grad_norm(model.parameters(), 0.5);
#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/reduce.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

// The sum of the squares of the gradients of `params` (those without one add nothing), in double;
// one read back from D for all of them.
template <class T, class D>
double squared_gradient_norm(const std::vector<Var<T, D>>& params) {
  if (params.empty()) return 0.0;
  Tensor<double, D> sums(Shape{static_cast<std::int64_t>(params.size())});
  sums.zero();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor<T, D>& g = params[i].grad();
    if (params[i].requires_grad() && g.defined() && g.numel() > 0)
      kernels::sum_of_squares(kernels::executor_for<D>{}, g.data(), g.numel(), sums.data() + i);
  }
  double total = 0;
  for (double s : sums.to_vector()) total += s;
  return total;
}

// Clips the gradients of `params` to the global norm max_norm and returns the norm before
// clipping. sum_over_parts(std::span<double>) sums the squared norm over the ranks that hold the
// rest of the gradients (a pipeline's stages, Sharded ranks); alone, the params are the whole model.
// counted: those of params this rank adds to the norm, where a copy of a parameter is on several
// of the ranks summed over (a pipeline's shared parameters) and counted on one.
template <class T, class D, class SumOverParts>
double clip_grad_norm(const std::vector<Var<T, D>>& params, double max_norm, SumOverParts&& sum_over_parts,
                      const std::vector<Var<T, D>>& counted) {
  check(max_norm > 0 && std::isfinite(max_norm), "clip_grad_norm: max_norm ", max_norm,
        " (expected a positive finite norm)");
  double squared = squared_gradient_norm(counted);
  sum_over_parts(std::span<double>(&squared, 1));
  const double norm = std::sqrt(squared);
  // torch's clip_coef, clamped to 1: a gradient within the norm is left as it is.
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1.0)
    for (const auto& p : params) {
      Tensor<T, D> g = p.grad();
      if (p.requires_grad() && g.defined() && g.numel() > 0)
        kernels::scale(kernels::executor_for<D>{}, g.data(), g.data(), g.numel(), coefficient);
    }
  return norm;
}
template <class T, class D, class SumOverParts>
double clip_grad_norm(const std::vector<Var<T, D>>& params, double max_norm, SumOverParts&& sum_over_parts) {
  return clip_grad_norm(params, max_norm, std::forward<SumOverParts>(sum_over_parts), params);
}
template <class T, class D>
double clip_grad_norm(const std::vector<Var<T, D>>& params, double max_norm) {
  return clip_grad_norm(params, max_norm, [](std::span<double>) {});
}

}  // namespace ptrain

PTRAIN_PREBUILT_OPS_FD(ptrain::squared_gradient_norm)
