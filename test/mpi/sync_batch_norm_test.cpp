// SyncBatchNorm under mpiexec -n 2 and -n 3: each rank trains on its rows of a global batch of 12
// (even and uneven splits) a conv + BatchNorm2d + relu + linear model converted to sync, and
// checks its output rows, its input-gradient rows, the parameter gradients summed over the ranks
// and the running statistics against the plain model run on the whole batch in this process.
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include "../common/compare.hpp"
#include <ptrain/autograd/backward.hpp>
#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/parallel/sync_batch_norm.hpp>

#include "mpi_test_main.hpp"

using namespace ptrain;
using Scalars = boost::mpl::list<double, float>;

namespace {

constexpr std::int64_t global_batch = 12, channels = 4;

template <class T>
std::shared_ptr<Sequential<T>> model() {
  auto m = make<Sequential<T>>();
  m->push_back(make<Conv2d<T>>(3, channels, 3, Conv2dOptions::square(1, 1)));
  m->push_back(make<BatchNorm2d<T>>(channels));
  m->push_back(make<ReLU<T>>());
  m->push_back(make<Flatten<T>>());
  m->push_back(make<Linear<T>>(channels * 5 * 5, 3));
  int k = 0;  // the same parameters on every rank and in the reference
  for (auto& named : m->named_parameters()) {
    Tensor<T>& p = named.second.value();
    ++k;
    for (std::int64_t i = 0; i < p.numel(); ++i)
      p[i] = static_cast<T>((p.numel() == channels ? 1.0 : 0.0) + 0.3 * std::sin(1.3 * static_cast<double>(i) + k));
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

using ptrain::test::worst_error;

// Rows [bounds[r], bounds[r + 1]) of the global batch belong to rank r.
std::vector<std::int64_t> even_bounds(int ranks) {
  std::vector<std::int64_t> b;
  for (int r = 0; r <= ranks; ++r) b.push_back(global_batch * r / ranks);
  return b;
}
std::vector<std::int64_t> uneven_bounds(int ranks) {  // rank r gets a share proportional to r + 1
  std::vector<std::int64_t> b;
  const std::int64_t shares = ranks * (ranks + 1) / 2;
  for (int r = 0; r <= ranks; ++r) b.push_back(global_batch * (r * (r + 1) / 2) / shares);
  return b;
}

template <class T>
void check_against_the_whole_batch(MpiComm& world, const std::vector<std::int64_t>& bounds) {
  const double tolerance = std::is_same_v<T, double> ? 1e-10 : 1e-5;  // measured: 1e-15 and 1.7e-6
  const auto r = static_cast<std::size_t>(world.rank());
  const std::int64_t begin = bounds[r], end = bounds[r + 1];
  MpiComm bn_comm = world.split(0, world.rank());
  auto synced = model<T>(), reference = model<T>();
  BOOST_REQUIRE(convert_sync_batchnorm(*synced, bn_comm) == 1u);

  for (int step = 0; step < 2; ++step) {
    BOOST_TEST_CONTEXT("step " << step << ", rows [" << begin << ", " << end << ")") {
      const Tensor<T> x = sequence<T>({global_batch, 3, 5, 5}, 0.1 + step, 0.5 + step);
      const Tensor<T> gy = sequence<T>({global_batch, 3}, 2.0 + step, 0.0);
      synced->zero_grad();
      reference->zero_grad();
      Var<T> xs(x.slice(begin, end).clone(), true), xr(x.clone(), true);
      const std::uint64_t bytes = bn_comm.bytes_sent();
      Var<T> ys = synced->forward(xs), yr = reference->forward(xr);
      backward(ys, gy.slice(begin, end).clone());
      backward(yr, gy.clone());
      // Counts and sums, squared deviations, then the two gradient sums: (1 + 4C) doubles.
      BOOST_TEST(bn_comm.bytes_sent() - bytes == (1 + 4 * channels) * sizeof(double));

      BOOST_TEST(worst_error(ys.value(), yr.value().slice(begin, end)) <= tolerance);
      BOOST_TEST(worst_error(xs.grad(), xr.grad().slice(begin, end)) <= tolerance);
      const auto mine = synced->named_parameters(), whole = reference->named_parameters();
      for (std::size_t i = 0; i < mine.size(); ++i) {
        BOOST_TEST_CONTEXT(mine[i].first) {
          Tensor<T> summed = mine[i].second.grad().clone();
          world.allreduce_sum(summed);
          BOOST_TEST(worst_error(summed, whole[i].second.grad()) <= tolerance);
        }
      }
      const auto buffers = synced->named_buffers(), whole_buffers = reference->named_buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i)
        BOOST_TEST_CONTEXT(buffers[i].first) {
          BOOST_TEST(worst_error(*buffers[i].second, *whole_buffers[i].second) <= tolerance);
        }
    }
  }

  // Evaluation uses the (equal) running statistics and no collective.
  synced->eval();
  reference->eval();
  const Tensor<T> x = sequence<T>({global_batch, 3, 5, 5}, 7.0, 1.0);
  const std::uint64_t bytes = bn_comm.bytes_sent();
  Var<T> ys = synced->forward(Var<T>(x.slice(begin, end).clone())), yr = reference->forward(Var<T>(x));
  BOOST_TEST(worst_error(ys.value(), yr.value().slice(begin, end)) <= tolerance);
  BOOST_TEST(bn_comm.bytes_sent() == bytes);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sync_batch_norm_test)

BOOST_AUTO_TEST_CASE_TEMPLATE(ranks_equal_the_whole_batch_in_one_process, T, Scalars) {
  MpiComm world(test::session());
  BOOST_REQUIRE(world.size() >= 2);
  BOOST_TEST_CONTEXT("even split") { check_against_the_whole_batch<T>(world, even_bounds(world.size())); }
  BOOST_TEST_CONTEXT("uneven split") { check_against_the_whole_batch<T>(world, uneven_bounds(world.size())); }
}

BOOST_AUTO_TEST_SUITE_END()
