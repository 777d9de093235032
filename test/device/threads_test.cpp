#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <thread>

#include <ptrain/device/threads.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(threads_test)

BOOST_AUTO_TEST_CASE(environment_overrides_the_core_count) {
  ::setenv("PTRAIN_NUM_THREADS", "3", 1);
  BOOST_TEST(detail::threads_from_environment() == 3);
  ::unsetenv("PTRAIN_NUM_THREADS");
  BOOST_TEST(detail::threads_from_environment() == static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

BOOST_AUTO_TEST_CASE(a_bad_value_is_an_error_naming_the_variable) {
  ::setenv("PTRAIN_NUM_THREADS", "two", 1);
  try {
    detail::threads_from_environment();
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("PTRAIN_NUM_THREADS='two'") != std::string::npos);
  }
  ::unsetenv("PTRAIN_NUM_THREADS");
}

BOOST_AUTO_TEST_CASE(set_num_threads_reaches_openmp_and_eigen) {
  set_num_threads(2);
  BOOST_TEST(num_threads() == 2);
  BOOST_TEST(Eigen::nbThreads() == 2);
#if defined(_OPENMP)
  BOOST_TEST(omp_get_max_threads() == 2);
#endif
  BOOST_CHECK_THROW(set_num_threads(0), Error);
}

BOOST_AUTO_TEST_SUITE_END()
