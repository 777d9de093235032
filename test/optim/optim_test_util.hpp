#pragma once
// Shared by the optimizer tests: the quadratic run the PyTorch references come from
// (test/optim/make_references.py), and comparisons.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/variable.hpp>
#include <ptrain/core/error.hpp>

namespace optim_test {

using Rows = std::vector<std::vector<double>>;

// p minimises 0.5 * sum(a p^2) - b.p with g = a p - b; q gets g = 3 q + 1 on even steps only
// and is skipped (no gradient) on odd ones. Returns p and q after each step.
struct Trajectory {
  Rows p, q;
};

inline void quadratic_grads(ptrain::Var<double>& p, ptrain::Var<double>& q, int k) {
  const double a[3] = {1.0, 0.5, 2.0}, b[3] = {0.1, -0.3, 0.2};
  p.grad() = ptrain::Tensor<double>({3});
  for (int i = 0; i < 3; ++i) p.grad()[i] = a[i] * p.value()[i] - b[i];
  q.zero_grad();
  if (k % 2 == 0) {
    q.grad() = ptrain::Tensor<double>({2});
    for (int i = 0; i < 2; ++i) q.grad()[i] = 3 * q.value()[i] + 1;
  }
}

inline ptrain::Var<double> initial_p() { return ptrain::Var<double>(ptrain::Tensor<double>::from({3}, {1.0, -2.0, 0.5}), true); }
inline ptrain::Var<double> initial_q() { return ptrain::Var<double>(ptrain::Tensor<double>::from({2}, {0.25, -0.75}), true); }

template <class Make>
Trajectory run_quadratic(Make make, int steps = 4) {
  auto p = initial_p();
  auto q = initial_q();
  auto opt = make(std::vector<ptrain::Var<double>>{p, q});
  Trajectory out;
  for (int k = 0; k < steps; ++k) {
    opt.zero_grad();
    quadratic_grads(p, q, k);
    opt.step();
    out.p.push_back(p.value().to_vector());
    out.q.push_back(q.value().to_vector());
  }
  return out;
}

inline void check_rows(const Rows& got, const Rows& want, double tol) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    BOOST_REQUIRE_EQUAL(got[k].size(), want[k].size());
    for (std::size_t i = 0; i < got[k].size(); ++i)
      BOOST_TEST(std::abs(got[k][i] - want[k][i]) <= tol * (1 + std::abs(want[k][i])),
                 "row " << k << " element " << i << ": got " << got[k][i] << ", expected " << want[k][i]);
  }
}

template <class F>
void check_throws_with(F f, const std::string& fragment) {
  try {
    f();
    BOOST_ERROR("expected an error mentioning '" << fragment << "'");
  } catch (const ptrain::Error& e) {
    BOOST_TEST(std::string(e.what()).find(fragment) != std::string::npos, e.what());
  }
}

}  // namespace optim_test
