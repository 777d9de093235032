#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <ptrain/comm/self_comm.hpp>
#include <ptrain/tensor/tensor.hpp>

#include "collective_checks.hpp"

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(self_comm_test)

using Scalars = boost::mpl::list<float, double, half, ptrain::bfloat16>;

BOOST_AUTO_TEST_CASE_TEMPLATE(every_collective_is_the_serial_result_in_a_world_of_one, T, Scalars) {
  SelfComm comm;
  BOOST_TEST(comm.rank() == 0);
  BOOST_TEST(comm.size() == 1);
  for (bool nonblocking : {false, true}) {
    for (std::size_t n : {0, 1, 13, 2053}) {
      test::check_allreduce<SelfComm, T>(comm, n, nonblocking);
      test::check_reduce_scatter<SelfComm, T>(comm, n, nonblocking);
      test::check_allgather<SelfComm, T>(comm, n, nonblocking);
      test::check_broadcast<SelfComm, T>(comm, n, 0, nonblocking);
    }
  }
  test::check_overlap<SelfComm, T>(comm, 100);
  test::check_send_recv<SelfComm, T>(comm, 17);
}

BOOST_AUTO_TEST_CASE(bytes_sent_counts_the_payload_and_fp16_is_half_of_fp32) {
  SelfComm comm;
  test::check_bytes_sent(comm);
}

BOOST_AUTO_TEST_CASE(a_receive_posted_before_its_send_completes_when_the_message_arrives) {
  SelfComm comm;
  std::vector<float> in(3, 0.0f);
  auto r = comm.irecv(in, 0, 5);
  BOOST_TEST(r.pending());
  BOOST_TEST(!r.test());
  comm.send(std::vector<float>{1, 2, 3}, 0, 5);
  BOOST_TEST(r.test());
  BOOST_TEST(in == (std::vector<float>{1, 2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(waiting_for_a_message_never_sent_is_an_error_not_a_hang) {
  SelfComm comm;
  std::vector<double> in(2);
  BOOST_CHECK_EXCEPTION(comm.recv(in, 0, 9), Error, [](const Error& e) {
    return std::string(e.what()).find("no message with tag 9") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(a_message_of_another_size_or_type_is_an_error) {
  SelfComm comm;
  comm.send(std::vector<float>{1, 2}, 0, 1);
  std::vector<float> three(3);
  BOOST_CHECK_THROW(comm.recv(three, 0, 1), Error);
  comm.send(std::vector<double>{1, 2}, 0, 2);
  std::vector<float> two(2);
  BOOST_CHECK_THROW(comm.recv(two, 0, 2), Error);
}

BOOST_AUTO_TEST_CASE(bad_arguments_throw_with_what_was_expected) {
  SelfComm comm;
  std::vector<float> a(4), b(3);
  BOOST_CHECK_EXCEPTION(comm.broadcast(a, 1), Error, [](const Error& e) {
    return std::string(e.what()) == "broadcast: root rank 1 is not in [0, 1)";
  });
  BOOST_CHECK_THROW(comm.reduce_scatter_sum(a, b), Error);
  BOOST_CHECK_THROW(comm.allgather(a, b), Error);
  BOOST_CHECK_THROW(comm.send(a, 0, -1), Error);
  BOOST_CHECK_THROW(comm.send(a, 1, 0), Error);
  BOOST_CHECK_THROW(comm.split(-1, 0), Error);
}

BOOST_AUTO_TEST_CASE(tensors_and_their_views_are_buffers) {
  SelfComm comm;
  auto t = Tensor<float>::from({2, 3}, {1, 2, 3, 4, 5, 6});
  comm.allreduce_sum(t);
  comm.broadcast(t.slice(1, 2), 0);
  Tensor<float> gathered({2, 3});
  comm.allgather(t, gathered);
  BOOST_TEST(gathered.to_vector() == t.to_vector(), boost::test_tools::per_element());
  BOOST_TEST(comm.bytes_sent() == 6 * 4 + 3 * 4 + 6 * 4);
  const Tensor<float>& readonly = t;
  static_assert(CommBuffer<const Tensor<float>&>);
  static_assert(!MutableCommBuffer<const Tensor<float>&>);
  comm.send(readonly, 0, 0);
  comm.recv(gathered, 0, 0);
}

BOOST_AUTO_TEST_CASE(split_gives_a_fresh_world_of_one) {
  SelfComm comm;
  std::vector<float> x(4, 1.0f);
  comm.allreduce_sum(x);
  SelfComm sub = comm.split(3, 7);
  BOOST_TEST(sub.size() == 1);
  BOOST_TEST(sub.bytes_sent() == 0u);
  comm.send(x, 0, 4);
  std::vector<float> y(4);
  BOOST_CHECK_THROW(sub.recv(y, 0, 4), Error);  // a message of the parent is not the child's
  comm.recv(y, 0, 4);
}

BOOST_AUTO_TEST_SUITE_END()
