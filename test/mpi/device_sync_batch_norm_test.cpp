// SyncBatchNorm on a device under mpiexec -n 2 and -n 3: the conv + BatchNorm2d + relu + linear
// model of test/common/sync_batch_norm_case.hpp on HostEmulated (the GPU algorithms, the hook's
// spans in the device's memory) and on the CPU, both converted to sync over one MpiComm, each rank
// its own rows of the global batch (even and uneven splits): outputs, input and parameter
// gradients, running statistics, the bytes the hooks sum, and evaluation agree.
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
BOOST_AUTO_TEST_SUITE(device_sync_batch_norm_test)

using Scalars = boost::mpl::list<double, float>;

namespace {

using namespace test::sync_batch_norm_case;
using ptrain::test::worst_error;

template <class T>
void check_device_against_cpu(MpiComm& world, const std::vector<std::int64_t>& bounds) {
  const double tolerance = std::is_same_v<T, double> ? 1e-13 : 1e-5;  // measured: 4.1e-15 and 1.3e-6
  const auto expect_close = [tolerance](const Tensor<T, HostEmulated>& got, const Tensor<T>& expected) {
    BOOST_TEST(worst_error(got.template to<Cpu>(), expected) <= tolerance);
  };
  const auto r = static_cast<std::size_t>(world.rank());
  const std::int64_t begin = bounds[r], end = bounds[r + 1];
  MpiComm bn_comm = world.split(0, world.rank());
  auto device = model<T, HostEmulated>();
  auto cpu = model<T>();
  BOOST_REQUIRE(convert_sync_batchnorm(*device, bn_comm) == 1u);
  BOOST_REQUIRE(convert_sync_batchnorm(*cpu, bn_comm) == 1u);

  for (int step = 0; step < 2; ++step) {
    BOOST_TEST_CONTEXT("step " << step << ", rows [" << begin << ", " << end << ")") {
      const Tensor<T> x = sequence<T>({global_batch, 3, 5, 5}, 0.1 + step, 0.5 + step).slice(begin, end).clone();
      const Tensor<T> gy = sequence<T>({global_batch, 3}, 2.0 + step, 0.0).slice(begin, end).clone();
      device->zero_grad();
      cpu->zero_grad();
      Var<T, HostEmulated> xd(x.template to<HostEmulated>(), true);
      Var<T> xc(x.clone(), true);
      const std::uint64_t bytes = bn_comm.bytes_sent();
      Var<T, HostEmulated> yd = device->forward(xd);
      backward(yd, gy.template to<HostEmulated>());
      // Counts and sums, squared deviations, then the two gradient sums: (1 + 4C) doubles.
      BOOST_TEST(bn_comm.bytes_sent() - bytes == (1 + 4 * channels) * sizeof(double));
      Var<T> yc = cpu->forward(xc);
      backward(yc, gy.clone());

      expect_close(yd.value(), yc.value());
      expect_close(xd.grad(), xc.grad());
      const auto mine = device->named_parameters(), theirs = cpu->named_parameters();
      for (std::size_t i = 0; i < mine.size(); ++i)
        BOOST_TEST_CONTEXT(mine[i].first) { expect_close(mine[i].second.grad(), theirs[i].second.grad()); }
      const auto buffers = device->named_buffers(), cpu_buffers = cpu->named_buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i)
        BOOST_TEST_CONTEXT(buffers[i].first) { expect_close(*buffers[i].second, *cpu_buffers[i].second); }
    }
  }

  // Evaluation uses the (equal) running statistics and no collective.
  device->eval();
  cpu->eval();
  const Tensor<T> x = sequence<T>({global_batch, 3, 5, 5}, 7.0, 1.0).slice(begin, end).clone();
  const std::uint64_t bytes = bn_comm.bytes_sent();
  expect_close(device->forward(Var<T, HostEmulated>(x.template to<HostEmulated>())).value(),
               cpu->forward(Var<T>(x)).value());
  BOOST_TEST(bn_comm.bytes_sent() == bytes);
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(a_device_model_equals_the_cpu_model_on_every_rank, T, Scalars) {
  MpiComm world(test::session());
  BOOST_REQUIRE(world.size() >= 2);
  for_each_split(world.size(), [&](const std::vector<std::int64_t>& bounds) { check_device_against_cpu<T>(world, bounds); });
}

BOOST_AUTO_TEST_SUITE_END()
