#pragma once
// Shared by the optimizer tests: the quadratic run the PyTorch references come from
// (test/optim/make_references.py), and comparisons.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <ptrain/autograd/variable.hpp>
#include <ptrain/core/error.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/optim/optimizer.hpp>
#include <ptrain/tensor/tensor.hpp>

namespace optim_test {

using Rows = std::vector<std::vector<double>>;

// The devices every optimizer test runs on: the CPU's Eigen updates and the indexed algorithms a
// GPU runs (HostEmulated).
using Devices = std::tuple<ptrain::Cpu, ptrain::HostEmulated>;

// p minimises 0.5 * sum(a p^2) - b.p with g = a p - b; q gets g = 3 q + 1 on even steps only
// and is skipped (no gradient) on odd ones. Returns p and q after each step.
struct Trajectory {
  Rows p, q;
};

template <class D>
void quadratic_grads(ptrain::Var<double, D>& p, ptrain::Var<double, D>& q, int k) {
  const double a[3] = {1.0, 0.5, 2.0}, b[3] = {0.1, -0.3, 0.2};
  const ptrain::Tensor<double> pv = ptrain::on_host(p.value());
  ptrain::Tensor<double> pg({3});
  for (int i = 0; i < 3; ++i) pg[i] = a[i] * pv[i] - b[i];
  p.grad() = ptrain::on_device<D>(pg);
  q.zero_grad();
  if (k % 2 == 0) {
    const ptrain::Tensor<double> qv = ptrain::on_host(q.value());
    ptrain::Tensor<double> qg({2});
    for (int i = 0; i < 2; ++i) qg[i] = 3 * qv[i] + 1;
    q.grad() = ptrain::on_device<D>(qg);
  }
}

template <class D = ptrain::Cpu>
ptrain::Var<double, D> initial_p() {
  return ptrain::Var<double, D>(ptrain::Tensor<double>::from({3}, {1.0, -2.0, 0.5}).template to<D>(), true);
}
template <class D = ptrain::Cpu>
ptrain::Var<double, D> initial_q() {
  return ptrain::Var<double, D>(ptrain::Tensor<double>::from({2}, {0.25, -0.75}).template to<D>(), true);
}

template <class D, class Make>
Trajectory run_quadratic(Make make, int steps = 4) {
  auto p = initial_p<D>();
  auto q = initial_q<D>();
  auto opt = make(std::vector<ptrain::Var<double, D>>{p, q});
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

template <class D>
std::vector<ptrain::Var<double, D>> copies_on(const std::vector<ptrain::Var<double>>& host) {
  std::vector<ptrain::Var<double, D>> out;
  for (const auto& v : host) out.emplace_back(v.value().template to<D>(), true);
  return out;
}

inline void check_same_state(const ptrain::OptimizerState<double>& got, const ptrain::OptimizerState<double>& want,
                             const std::string& what) {
  BOOST_TEST(got.scalars == want.scalars, what);
  BOOST_REQUIRE_EQUAL(got.tensors.size(), want.tensors.size());
  for (std::size_t i = 0; i < got.tensors.size(); ++i) {
    BOOST_TEST(got.tensors[i].first == want.tensors[i].first, what);
    BOOST_TEST(got.tensors[i].second.to_vector() == want.tensors[i].second.to_vector(),
               what << ": state entry " << got.tensors[i].first);
  }
}

// An optimizer's state moved between devices mid-run. FromOpt (on its device From) takes `split`
// steps of the quadratic run and saves its state; ToOpt (the same algorithm on To) loads it: its
// state() must then be the saved one, bit for bit. Saved again from To and loaded back on From,
// it resumes From's run exactly as if it had never stopped. Resumed on To, it follows From's run
// within rounding (the CPU's vectorised updates may fuse a multiply-add the indexed ones do not).
template <class FromOpt, class ToOpt, class Options>
void check_state_moves_between_devices(const Options& options, int split, int steps = 4) {
  using From = typename FromOpt::device_type;
  using To = typename ToOpt::device_type;
  const std::string what = std::string(From::name) + " -> " + To::name;
  const auto straight = run_quadratic<From>([&](auto ps) { return FromOpt(ps, options); }, steps);

  std::vector<ptrain::Var<double, From>> first_params{initial_p<From>(), initial_q<From>()};
  FromOpt first(first_params, options);
  for (int k = 0; k < split; ++k) {
    quadratic_grads(first_params[0], first_params[1], k);
    first.step();
  }
  std::vector<ptrain::Var<double>> at_split;
  for (const auto& v : first_params) at_split.emplace_back(ptrain::on_host(v.value()).clone(), true);
  auto saved = first.state();
  for (auto& [name, t] : saved.tensors) t = t.clone();  // what a checkpoint file would hold

  auto moved_params = copies_on<To>(at_split);
  ToOpt moved(moved_params, options);
  moved.load_state(saved);
  auto moved_state = moved.state();
  check_same_state(moved_state, saved, what + ", loaded");
  for (auto& [name, t] : moved_state.tensors) t = t.clone();

  auto back_params = copies_on<From>(at_split);
  FromOpt back(back_params, options);
  back.load_state(moved_state);
  for (int k = split; k < steps; ++k) {
    quadratic_grads(moved_params[0], moved_params[1], k);
    moved.step();
    quadratic_grads(back_params[0], back_params[1], k);
    back.step();
  }
  BOOST_TEST(back_params[0].value().to_vector() == straight.p.back(), what << " and back: p");
  BOOST_TEST(back_params[1].value().to_vector() == straight.q.back(), what << " and back: q");
  check_rows({moved_params[0].value().to_vector()}, {straight.p.back()}, 1e-13);
  check_rows({moved_params[1].value().to_vector()}, {straight.q.back()}, 1e-13);
}

}  // namespace optim_test
