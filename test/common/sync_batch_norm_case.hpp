#pragma once
// The multi-rank SyncBatchNorm tests' case (test/mpi/*sync_batch_norm_test.cpp): a conv +
// BatchNorm2d + relu + linear model on device D with the same parameters everywhere, smooth
// inputs with per-channel offsets, and the even and uneven splits of a global batch of 12 over
// the ranks.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>

namespace ptrain::test::sync_batch_norm_case {

constexpr std::int64_t global_batch = 12, channels = 4;

template <class T, class D = Cpu>
std::shared_ptr<Sequential<T, D>> model() {
  auto m = make<Sequential<T, D>>();
  m->push_back(make<Conv2d<T, D>>(3, channels, 3, Conv2dOptions::square(1, 1)));
  m->push_back(make<BatchNorm2d<T, D>>(channels));
  m->push_back(make<ReLU<T, D>>());
  m->push_back(make<Flatten<T, D>>());
  m->push_back(make<Linear<T, D>>(channels * 5 * 5, 3));
  int k = 0;  // the same parameters on every rank, device and in the reference
  for (auto& named : m->named_parameters()) {
    Tensor<T, D>& p = named.second.value();
    Tensor<T> values(p.shape());
    ++k;
    for (std::int64_t i = 0; i < p.numel(); ++i)
      values[i] =
          static_cast<T>((p.numel() == channels ? 1.0 : 0.0) + 0.3 * std::sin(1.3 * static_cast<double>(i) + k));
    p.copy_from(values.template to<D>());
  }
  return m;
}

// Smooth values with a per-channel offset, so the batch statistics are not trivial.
template <class T>
Tensor<T> sequence(const Shape& shape, double phase, double offset) {
  Tensor<T> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t[i] = static_cast<T>(1.5 * std::sin(0.37 * static_cast<double>(i) + phase) + offset * static_cast<double>(i % 3));
  return t;
}

// Rows [bounds[r], bounds[r + 1]) of the global batch belong to rank r.
inline std::vector<std::int64_t> even_bounds(int ranks) {
  std::vector<std::int64_t> b;
  for (int r = 0; r <= ranks; ++r) b.push_back(global_batch * r / ranks);
  return b;
}
inline std::vector<std::int64_t> uneven_bounds(int ranks) {  // rank r gets a share proportional to r + 1
  std::vector<std::int64_t> b;
  const std::int64_t shares = ranks * (ranks + 1) / 2;
  for (int r = 0; r <= ranks; ++r) b.push_back(global_batch * (r * (r + 1) / 2) / shares);
  return b;
}

// check(bounds) for the even and the uneven split over `ranks`.
template <class Check>
void for_each_split(int ranks, Check&& check) {
  BOOST_TEST_CONTEXT("even split") { check(even_bounds(ranks)); }
  BOOST_TEST_CONTEXT("uneven split") { check(uneven_bounds(ranks)); }
}

}  // namespace ptrain::test::sync_batch_norm_case
