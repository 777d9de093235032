#pragma once
// Finite-difference check of an op's backward, in double: the analytic gradient of
// L = sum(w * f(inputs)) for a random w against central differences of L.
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/core/rng.hpp"

namespace ptrain {

struct GradcheckResult {
  bool ok = true;
  double max_error = 0;  // |analytic - numeric| / max(1, |numeric|), worst element
  std::string report;    // the first failing element, for the test's message
};

using GradcheckFn = std::function<Var<double>(const std::vector<Var<double>>&)>;

inline GradcheckResult gradcheck(const GradcheckFn& f, std::vector<Tensor<double>> inputs, double eps = 1e-6,
                                 double tolerance = 1e-5, std::uint64_t seed = 7) {
  Rng rng(seed);
  std::vector<Var<double>> vars;
  for (auto& t : inputs) vars.emplace_back(t, true);
  Var<double> y = f(vars);
  Tensor<double> w(y.shape());
  for (std::int64_t i = 0; i < w.numel(); ++i) w[i] = rng.uniform(-1, 1);
  backward(y, w.clone());

  auto loss = [&] {
    NoGradGuard no_grad;
    std::vector<Var<double>> constants;
    for (auto& t : inputs) constants.emplace_back(t, false);
    const Var<double> out = f(constants);
    return (out.value().array() * w.array()).sum();
  };

  GradcheckResult result;
  for (std::size_t v = 0; v < inputs.size(); ++v) {
    Tensor<double>& x = inputs[v];
    const Tensor<double>& analytic = vars[v].grad();
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
        msg << "input " << v << " element " << i << ": analytic " << got << ", numeric " << numeric;
        result.report = msg.str();
      }
    }
  }
  return result;
}

// A tensor of the given shape with entries uniform in [lo, hi).
inline Tensor<double> random_tensor(const Shape& shape, std::uint64_t seed, double lo = -1, double hi = 1) {
  Rng rng(seed);
  Tensor<double> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = rng.uniform(lo, hi);
  return t;
}

}  // namespace ptrain
