// SyncBatchNorm under mpiexec -n 2 and -n 3: each rank trains on its rows of a global batch of 12
// (even and uneven splits) a conv + BatchNorm2d + relu + linear model converted to sync, and
// checks its output rows, its input-gradient rows, the parameter gradients summed over the ranks
// and the running statistics against the plain model run on the whole batch in this process.
#include <cstdint>
#include <type_traits>
#include <vector>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include "../common/compare.hpp"
#include "../common/sync_batch_norm_case.hpp"
#include <ptrain/autograd/backward.hpp>
#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/parallel/sync_batch_norm.hpp>

#include "mpi_test_main.hpp"

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(sync_batch_norm_test)

using Scalars = boost::mpl::list<double, float>;

namespace {

using namespace test::sync_batch_norm_case;
using ptrain::test::worst_error;

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

BOOST_AUTO_TEST_CASE_TEMPLATE(ranks_equal_the_whole_batch_in_one_process, T, Scalars) {
  MpiComm world(test::session());
  BOOST_REQUIRE(world.size() >= 2);
  for_each_split(world.size(), [&](const std::vector<std::int64_t>& bounds) { check_against_the_whole_batch<T>(world, bounds); });
}

BOOST_AUTO_TEST_SUITE_END()
