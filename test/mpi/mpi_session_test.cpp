// MpiSession under mpiexec: the process info agrees with MPI, a second session is refused.
#include <boost/test/unit_test.hpp>

#include <ptrain/launch/mpi_session.hpp>
#include <ptrain/launch/process_info.hpp>

#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(mpi_session_test)

using ptrain::bfloat16;  // beside the global one of OpenBLAS's cblas.h, where a kernel header includes it

BOOST_AUTO_TEST_CASE(process_info_agrees_with_mpi_and_hydras_environment) {
  MpiSession& session = test::session();
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ProcessInfo& info = session.info();
  BOOST_TEST(info.rank == rank);
  BOOST_TEST(info.world_size == size);
  BOOST_TEST(info.launcher == "mpiexec");
  // On one machine every rank shares the node.
  BOOST_TEST(info.local_size == size);
  BOOST_TEST(info.local_rank == rank);
  const ProcessInfo env = detect_process_info();
  BOOST_TEST(env.rank == rank);
  BOOST_TEST(env.world_size == size);
  BOOST_TEST(static_cast<int>(session.threading()) >= static_cast<int>(MpiThreading::funneled));
}

BOOST_AUTO_TEST_CASE(a_second_session_is_refused_with_a_clear_error) {
  BOOST_CHECK_EXCEPTION(MpiSession second, Error, [](const Error& e) {
    return std::string(e.what()).find("MpiSession: MPI is already initialised (another MpiSession is alive") == 0;
  });
}

BOOST_AUTO_TEST_CASE(wire_types_are_two_bytes_with_sums_in_float) {
  const MpiWireTypes& types = test::session().wire_types();
  int bytes = 0;
  MPI_Type_size(types.datatype<half>(), &bytes);
  BOOST_TEST(bytes == 2);
  MPI_Type_size(types.datatype<bfloat16>(), &bytes);
  BOOST_TEST(bytes == 2);
  BOOST_TEST(types.datatype<half>() != types.datatype<bfloat16>());
  BOOST_TEST(types.sum<float>() == MPI_SUM);
  // The local reduction itself, on blocks shorter and longer than its conversion block.
  std::vector<half> a{half(1.0f), half(0.5f)}, b{half(2.0f), half(0.25f)};
  MPI_Reduce_local(a.data(), b.data(), 2, types.datatype<half>(), types.sum<half>());
  BOOST_TEST(static_cast<float>(b[0]) == 3.0f);
  BOOST_TEST(static_cast<float>(b[1]) == 0.75f);
  std::vector<bfloat16> c(3000, bfloat16(1.5f)), d(3000, bfloat16(-0.25f));
  MPI_Reduce_local(c.data(), d.data(), 3000, types.datatype<bfloat16>(), types.sum<bfloat16>());
  BOOST_TEST(static_cast<float>(d[2999]) == 1.25f);
}

BOOST_AUTO_TEST_SUITE_END()
