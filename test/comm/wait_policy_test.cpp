// comm/wait_policy.hpp: which ranks spin while they wait and which sleep, and PTRAIN_WAIT_POLICY's
// values; the multi-rank suites (test/mpi) run both ways, active at 2 ranks and passive at 3 and
// more on a 2-core host.
#include <boost/test/unit_test.hpp>

#include <string>

#include <ptrain/comm/wait_policy.hpp>

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(wait_policy_test)

BOOST_AUTO_TEST_CASE(auto_sleeps_where_the_node_runs_more_threads_than_cores) {
  for (const char* setting : {static_cast<const char*>(nullptr), "", "auto"}) {
    BOOST_TEST((wait_policy_for(setting, 2, 1, 2) == WaitPolicy::active));
    BOOST_TEST((wait_policy_for(setting, 3, 1, 2) == WaitPolicy::passive));
    BOOST_TEST((wait_policy_for(setting, 2, 2, 2) == WaitPolicy::passive));  // 2 ranks of 2 threads each
    BOOST_TEST((wait_policy_for(setting, 8, 4, 32) == WaitPolicy::active));
    BOOST_TEST((wait_policy_for(setting, 8, 4, 31) == WaitPolicy::passive));
  }
}

BOOST_AUTO_TEST_CASE(active_and_passive_are_taken_as_said) {
  BOOST_TEST((wait_policy_for("active", 16, 1, 2) == WaitPolicy::active));
  BOOST_TEST((wait_policy_for("passive", 1, 1, 64) == WaitPolicy::passive));
}

BOOST_AUTO_TEST_CASE(another_value_is_an_error_naming_the_variable_and_the_values) {
  BOOST_CHECK_EXCEPTION(wait_policy_for("yield", 2, 1, 2), Error, [](const Error& e) {
    return std::string(e.what()).find("PTRAIN_WAIT_POLICY='yield': expected active, passive or auto") !=
           std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(this_process_has_a_core) { BOOST_TEST(usable_cores() >= 1); }

BOOST_AUTO_TEST_CASE(a_passive_poll_reports_done_and_waits_otherwise) {
  int polls = 0;
  auto third_time = [&] { return ++polls == 3; };
  detail::PassivePoll poll(third_time);
  BOOST_TEST(!poll());
  BOOST_TEST(!poll());
  BOOST_TEST(poll());
  BOOST_TEST(polls == 3);
}

BOOST_AUTO_TEST_SUITE_END()
