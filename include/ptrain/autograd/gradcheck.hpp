#pragma once
// Finite-difference check of an op's backward, in double: the analytic gradient of
// L = sum(w * f(inputs)) for a random w against central differences of L; gradcheck_parameters
// does the same for a module's parameters.
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/core/rng.hpp"

namespace ptrain {

struct GradcheckResult {
  bool ok = true;
  double max_error = 0;  // |analytic - numeric| / max(1, |numeric|), worst element
  std::string report;    // the first failing element, for the test's message
};

// A tensor of the given shape with entries uniform in [lo, hi).
inline Tensor<double> random_tensor(const Shape& shape, std::uint64_t seed, double lo = -1, double hi = 1) {
  Rng rng(seed);
  Tensor<double> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = rng.uniform(lo, hi);
  return t;
}

using GradcheckFn = std::function<Var<double>(const std::vector<Var<double>>&)>;

namespace detail {
// Compares analytic[i] with the central difference of loss() as x[i] moves by ±eps, for every i
// of x; records the worst error and the first failure (naming `what`) in result.
inline void compare_with_differences(Tensor<double>& x, const Tensor<double>& analytic,
                                     const std::function<double()>& loss, double eps, double tolerance,
                                     const std::string& what, GradcheckResult& result) {
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double plus = loss();
    x[i] = saved - eps;
    const double minus = loss();
    x[i] = saved;
    const double numeric = (plus - minus) / (2 * eps);
    const double got = analytic.defined() ? analytic[i] : 0.0;
    const double error = std::abs(got - numeric) / std::max(1.0, std::abs(numeric));
    if (error > result.max_error) result.max_error = error;
    if (error > tolerance && result.ok) {
      result.ok = false;
      std::ostringstream msg;
      msg << what << " element " << i << ": analytic " << got << ", numeric " << numeric;
      result.report = msg.str();
    }
  }
}

}  // namespace detail

// The op's inputs, outputs and gradients on device D; the differences are taken on the host.
template <class D>
using DeviceGradcheckFn = std::function<Var<double, D>(const std::vector<Var<double, D>>&)>;

// gradcheck of an op running on device D (HostEmulated runs the GPU algorithms on the host). On the
// CPU the op gets the inputs themselves, which the differences perturb in place.
template <class D>
GradcheckResult gradcheck_on(const DeviceGradcheckFn<D>& f, std::vector<Tensor<double>> inputs, double eps = 1e-6,
                             double tolerance = 1e-5, std::uint64_t seed = 7) {
  std::vector<Var<double, D>> vars;
  for (auto& t : inputs) vars.emplace_back(on_device<D>(t), true);
  Var<double, D> y = f(vars);
  const Tensor<double> w = random_tensor(y.shape(), seed);
  backward(y, on_device<D>(w.clone()));

  auto loss = [&] {
    NoGradGuard no_grad;
    std::vector<Var<double, D>> constants;
    for (auto& t : inputs) constants.emplace_back(on_device<D>(t), false);
    const Var<double, D> out = f(constants);
    return (on_host(out.value()).array() * w.array()).sum();
  };

  GradcheckResult result;
  for (std::size_t v = 0; v < inputs.size(); ++v)
    detail::compare_with_differences(inputs[v], on_host(vars[v].grad()), loss, eps, tolerance,
                                     "input " + std::to_string(v), result);
  return result;
}

inline GradcheckResult gradcheck(const GradcheckFn& f, std::vector<Tensor<double>> inputs, double eps = 1e-6,
                                 double tolerance = 1e-5, std::uint64_t seed = 7) {
  return gradcheck_on<Cpu>(f, std::move(inputs), eps, tolerance, seed);
}

// The same check for the parameters a computation reads by itself (a module's, from
// named_parameters()): each element is perturbed in place. Their gradients are reset first.
inline GradcheckResult gradcheck_parameters(const std::function<Var<double>()>& f,
                                            std::vector<std::pair<std::string, Var<double>>> parameters,
                                            double eps = 1e-6, double tolerance = 1e-5, std::uint64_t seed = 7) {
  for (auto& [name, p] : parameters) p.zero_grad();
  Var<double> y = f();
  const Tensor<double> w = random_tensor(y.shape(), seed);
  backward(y, w.clone());
  auto loss = [&] {
    NoGradGuard no_grad;
    return (f().value().array() * w.array()).sum();
  };
  GradcheckResult result;
  for (auto& [name, p] : parameters)
    detail::compare_with_differences(p.value(), p.grad(), loss, eps, tolerance, name, result);
  return result;
}

}  // namespace ptrain
