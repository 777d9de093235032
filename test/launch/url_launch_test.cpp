// A launch by URL: the URL and rank checks, torchrun's variables, and the node map rank 0's
// rendezvous hands MPICH (the rendezvous itself runs in test/mpi: url_launch.sh).
#include <map>
#include <string>

#include <boost/test/unit_test.hpp>

#include <ptrain/launch/process_info.hpp>
#include <ptrain/launch/rendezvous_server.hpp>
#include <ptrain/launch/url_launch.hpp>

#include "../common/files.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(url_launch_test)

namespace {

using Env = std::map<std::string, std::string>;

detail::LaunchEnvironment parse(const Env& env) {
  return detail::parse_launch_environment([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

using test::contains;
using test::error_of;

}  // namespace

BOOST_AUTO_TEST_CASE(init_url_with_and_without_port) {
  const UrlLaunch a = url_launch("tcp://10.128.0.8:29555", 2, 3);
  BOOST_TEST(a.host == "10.128.0.8");
  BOOST_TEST(a.port == 29555);
  BOOST_TEST(a.rank == 2);
  BOOST_TEST(a.world_size == 3);
  BOOST_TEST(a.url() == "tcp://10.128.0.8:29555");
  // The VGG-F project's -iu tcp://10.128.0.8 names no port: torchrun's default.
  const UrlLaunch b = url_launch("tcp://node0", 0, 1);
  BOOST_TEST(b.host == "node0");
  BOOST_TEST(b.port == 29500);
}

BOOST_AUTO_TEST_CASE(bad_urls_and_ranks_are_refused_with_the_reason) {
  BOOST_TEST(contains(error_of([] { url_launch("10.0.0.1:29500", 0, 2); }),
                      "'10.0.0.1:29500' must look like tcp://HOST:PORT"));
  BOOST_TEST(contains(error_of([] { url_launch("tcp://:29500", 0, 2); }), "names no host"));
  BOOST_TEST(contains(error_of([] { url_launch("tcp://h:port", 0, 2); }),
                      "--init-url port='port' is not a non-negative integer"));
  BOOST_TEST(contains(error_of([] { url_launch("tcp://h:70000", 0, 2); }), "port 70000 is not in 1..65535"));
  BOOST_TEST(contains(error_of([] { url_launch("tcp://h:1", 2, 2); }), "rank 2 is not in [0, world size 2)"));
  BOOST_TEST(contains(error_of([] { url_launch("tcp://h:1", 0, 0); }), "world size 0 must be at least 1"));
}

BOOST_AUTO_TEST_CASE(torchrun_variables_make_a_url_launch) {
  const auto launch =
      parse({{"MASTER_ADDR", "10.77.0.1"}, {"MASTER_PORT", "29501"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
  BOOST_TEST(launch.info.launcher == "url");
  BOOST_TEST(launch.info.rank == 1);
  BOOST_TEST(launch.info.world_size == 2);
  BOOST_TEST(!launch.local_known);  // MpiSession asks MPI which ranks share a node
  BOOST_REQUIRE(launch.url.has_value());
  BOOST_TEST(launch.url->url() == "tcp://10.77.0.1:29501");
  const auto local = parse({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}, {"RANK", "3"}, {"WORLD_SIZE", "4"},
                            {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}});
  BOOST_TEST(local.local_known);
  BOOST_TEST(local.info.local_rank == 1);
  BOOST_TEST(local.info.local_size == 2);
  // mpiexec's variables win: MASTER_ADDR left in a batch script does not change an mpiexec run.
  const auto under_mpiexec = parse({{"MASTER_ADDR", "h"}, {"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  BOOST_TEST(under_mpiexec.info.launcher == "mpiexec");
  BOOST_TEST(!under_mpiexec.url.has_value());
}

BOOST_AUTO_TEST_CASE(incomplete_torchrun_variables_name_the_missing_ones) {
  const std::string m = error_of([] { parse({{"MASTER_ADDR", "h"}, {"RANK", "0"}}); });
  BOOST_TEST(contains(m, "MASTER_PORT, RANK and WORLD_SIZE must be too (MASTER_PORT WORLD_SIZE unset)"), m);
  const Env bad_port = {{"MASTER_ADDR", "h"}, {"MASTER_PORT", "x"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}};
  BOOST_TEST(contains(error_of([&] { parse(bad_port); }), "MASTER_ADDR:MASTER_PORT port='x'"));
  const Env bad_rank = {{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}};
  BOOST_TEST(contains(error_of([&] { parse(bad_rank); }), "rank 2 is not in [0, world size 2)"));
}

BOOST_AUTO_TEST_CASE(node_map_has_one_block_per_run_of_ranks_on_a_host) {
  BOOST_TEST(detail::process_mapping({"a"}) == "(vector,(0,1,1))");
  BOOST_TEST(detail::process_mapping({"a", "a", "a"}) == "(vector,(0,1,3))");
  BOOST_TEST(detail::process_mapping({"a", "a", "b", "b"}) == "(vector,(0,1,2),(1,1,2))");
  BOOST_TEST(detail::process_mapping({"a", "b", "a"}) == "(vector,(0,1,1),(1,1,1),(0,1,1))");
}

BOOST_AUTO_TEST_CASE(pmi_lines_split_into_keys_and_values) {
  auto values = detail::key_values("cmd=put kvsname=ptrain key=-bcast-1-0 value=2F64=x");
  BOOST_TEST(values["cmd"] == "put");
  BOOST_TEST(values["key"] == "-bcast-1-0");
  BOOST_TEST(values["value"] == "2F64=x");
}

BOOST_AUTO_TEST_SUITE_END()
