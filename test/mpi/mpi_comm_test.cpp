// MpiComm under mpiexec -n 2 and -n 3: every collective for every element type against the
// serial result, overlapping non-blocking forms, sub-communicators, point to point, byte counts;
// the ranks' collectives compared (check_collectives), a difference named with both ranks.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/tensor/tensor.hpp>

#include "../comm/collective_checks.hpp"
#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(mpi_comm_test)

using ptrain::bfloat16;  // beside the global one of OpenBLAS's cblas.h, where a kernel header includes it
using Scalars = boost::mpl::list<float, double, half, bfloat16>;

namespace {

// Sizes below, at and above MPICH's switch points and the sum operation's block of 1024.
constexpr std::size_t sizes[] = {0, 1, 13, 1024, 2053, 70001};

// True when buf is bit for bit the same on every rank of comm.
template <class T>
bool same_bits_everywhere(MpiComm& comm, const std::vector<T>& buf) {
  std::vector<T> all(buf.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(buf, all);
  for (int r = 0; r < comm.size(); ++r)
    if (std::memcmp(static_cast<const void*>(all.data() + r * buf.size()), static_cast<const void*>(buf.data()),
                    buf.size() * sizeof(T)) != 0)
      return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_world_is_every_rank_in_order) {
  MpiComm world(test::session());
  BOOST_TEST(world.size() == test::session().world_size());
  BOOST_TEST(world.rank() == test::session().rank());
  BOOST_TEST(world.size() >= 2, "run the multi-rank tests with at least 2 ranks");
  int result = MPI_UNEQUAL;
  MPI_Comm_compare(world.handle(), MPI_COMM_WORLD, &result);
  BOOST_TEST(result == MPI_CONGRUENT);  // a duplicate: same ranks, its own message space
}

BOOST_AUTO_TEST_CASE_TEMPLATE(blocking_collectives_equal_the_serial_result, T, Scalars) {
  MpiComm world(test::session());
  for (std::size_t n : sizes) {
    test::check_allreduce<MpiComm, T>(world, n, false);
    test::check_reduce_scatter<MpiComm, T>(world, n, false);
    test::check_allgather<MpiComm, T>(world, n, false);
    test::check_broadcast<MpiComm, T>(world, n, 0, false);
    test::check_broadcast<MpiComm, T>(world, n, world.size() - 1, false);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(non_blocking_collectives_equal_the_serial_result, T, Scalars) {
  MpiComm world(test::session());
  for (std::size_t n : sizes) {
    test::check_allreduce<MpiComm, T>(world, n, true);
    test::check_reduce_scatter<MpiComm, T>(world, n, true);
    test::check_allgather<MpiComm, T>(world, n, true);
    test::check_broadcast<MpiComm, T>(world, n, world.size() - 1, true);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(sums_are_bit_for_bit_the_same_on_every_rank, T, Scalars) {
  // Data-parallel replicas stay identical only if every rank gets the same rounding.
  MpiComm world(test::session());
  for (std::size_t n : {std::size_t{13}, std::size_t{70001}}) {
    auto data = test::inputs<T>(world.rank(), n, false);
    world.allreduce_sum(data);
    BOOST_TEST(same_bits_everywhere(world, data), "allreduce_sum of " << n << " " << scalar_name<T>);
    data = test::inputs<T>(world.rank(), n, false);
    world.iallreduce_sum(data).wait();
    BOOST_TEST(same_bits_everywhere(world, data), "iallreduce_sum of " << n << " " << scalar_name<T>);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(allreduce_in_pieces_equals_the_serial_result, T, Scalars) {
  MpiComm world(test::session());
  BOOST_TEST(world.allreduce_piece_bytes() == std::size_t{2} << 20);
  world.set_allreduce_piece_bytes(1000);  // 70001 elements go in 71 to 141 pieces
  MpiComm sub = world.split(0, world.rank());
  BOOST_TEST(sub.allreduce_piece_bytes() == 1000u);
  for (std::size_t n : {std::size_t{499}, std::size_t{2053}, std::size_t{70001}}) {
    test::check_allreduce<MpiComm, T>(sub, n, false);
    test::check_allreduce<MpiComm, T>(sub, n, true);
    auto data = test::inputs<T>(world.rank(), n, false);
    sub.iallreduce_sum(data).wait();
    BOOST_TEST(same_bits_everywhere(sub, data), "pieces of " << n << " " << scalar_name<T>);
  }
  BOOST_CHECK_THROW(world.set_allreduce_piece_bytes(0), Error);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(overlapping_non_blocking_collectives_and_point_to_point, T, Scalars) {
  MpiComm world(test::session());
  for (std::size_t n : {std::size_t{1}, std::size_t{2053}, std::size_t{70001}}) {
    test::check_overlap<MpiComm, T>(world, n);
    test::check_send_recv<MpiComm, T>(world, n);
  }
}

BOOST_AUTO_TEST_CASE(split_into_even_and_odd_ranks_and_reduce_within_each) {
  MpiComm world(test::session());
  const int rank = world.rank(), size = world.size();
  // key = -rank reverses the order inside each group.
  MpiComm parity = world.split(rank % 2, -rank);
  const int members = (size + 1 - rank % 2) / 2;
  BOOST_TEST(parity.size() == members);
  BOOST_TEST(parity.rank() == members - 1 - rank / 2);

  std::vector<double> x{static_cast<double>(rank), 1.0};
  parity.allreduce_sum(x);
  double expected = 0;
  for (int r = rank % 2; r < size; r += 2) expected += r;
  BOOST_TEST(x[0] == expected);
  BOOST_TEST(x[1] == static_cast<double>(members));

  // Every collective and point to point inside the sub-communicator, and a split of a split.
  for (std::size_t n : {std::size_t{5}, std::size_t{2053}}) {
    test::check_allreduce<MpiComm, half>(parity, n, true);
    test::check_reduce_scatter<MpiComm, float>(parity, n, false);
    test::check_allgather<MpiComm, bfloat16>(parity, n, true);
    test::check_broadcast<MpiComm, double>(parity, n, parity.size() - 1, false);
    test::check_send_recv<MpiComm, float>(parity, n);
  }
  MpiComm alone = parity.split(parity.rank(), 0);
  BOOST_TEST(alone.size() == 1);
  std::vector<float> y{3.0f};
  alone.allreduce_sum(y);
  BOOST_TEST(y[0] == 3.0f);

  // Moving keeps the communicator; the moved-from one owns nothing.
  MpiComm moved = std::move(parity);
  BOOST_TEST(moved.size() == members);
  BOOST_TEST(parity.handle() == MPI_COMM_NULL);
  moved.barrier();
}

BOOST_AUTO_TEST_CASE(bytes_sent_counts_the_payload_and_fp16_is_half_of_fp32) {
  MpiComm world(test::session());
  test::check_bytes_sent(world);
}

BOOST_AUTO_TEST_CASE(a_message_of_the_wrong_length_is_an_error_on_the_receiver) {
  MpiComm world(test::session());
  const int rank = world.rank();
  if (rank == 0) {
    world.send(std::vector<float>(5, 1.0f), 1, 21);
    world.send(std::vector<float>(9, 1.0f), 1, 22);
    BOOST_TEST(world.bytes_sent() == (5u + 9u) * sizeof(float));
  } else if (rank == 1) {
    std::vector<float> eight(8);
    BOOST_CHECK_EXCEPTION(world.recv(eight, 0, 21), Error, [](const Error& e) {
      return std::string(e.what()) == "MpiComm::recv: expected 8 elements from rank 0 with tag 21, the message held 5";
    });
    BOOST_CHECK_EXCEPTION(world.recv(eight, 0, 22), Error, [](const Error& e) {
      return std::string(e.what()).find("MPI_Recv failed: Message truncated") == 0;
    });
  }
  world.barrier();
}

BOOST_AUTO_TEST_CASE(bad_arguments_throw_on_every_rank_before_anything_is_sent) {
  MpiComm world(test::session());
  std::vector<float> a(4), b(3);
  BOOST_CHECK_EXCEPTION(world.broadcast(a, world.size()), Error, [&](const Error& e) {
    return std::string(e.what()) ==
           "broadcast: root rank " + std::to_string(world.size()) + " is not in [0, " + std::to_string(world.size()) + ")";
  });
  std::vector<float> scatter_send(world.size() * 3 + 1), scatter_recv(3);
  BOOST_CHECK_THROW(world.reduce_scatter_sum(scatter_send, scatter_recv), Error);
  BOOST_CHECK_THROW(world.allgather(a, b), Error);
  BOOST_CHECK_THROW(world.isend(a, -1, 0), Error);
  BOOST_CHECK_THROW(world.send(a, 0, -2), Error);
  BOOST_CHECK_THROW(world.split(-1, 0), Error);
  world.barrier();  // and the world still works
  std::vector<float> one{1.0f};
  world.allreduce_sum(one);
  BOOST_TEST(one[0] == static_cast<float>(world.size()));
}

BOOST_AUTO_TEST_CASE(tensors_are_buffers) {
  MpiComm world(test::session());
  auto t = Tensor<float>::full({2, 3}, static_cast<float>(world.rank() + 1));
  world.allreduce_sum(t);
  const float total = static_cast<float>(world.size() * (world.size() + 1) / 2);
  BOOST_TEST(t.to_vector() == std::vector<float>(6, total), boost::test_tools::per_element());
  auto h = Tensor<half>::full({4}, half(static_cast<float>(world.rank())));
  world.broadcast(h.slice(1, 3), world.size() - 1);
  BOOST_TEST(static_cast<float>(h[1]) == static_cast<float>(world.size() - 1));
  BOOST_TEST(static_cast<float>(h[0]) == static_cast<float>(world.rank()));
}

BOOST_AUTO_TEST_CASE(an_unfinished_request_is_finished_by_its_destructor) {
  MpiComm world(test::session());
  std::vector<double> x{1.0};
  { auto r = world.iallreduce_sum(x); }
  BOOST_TEST(x[0] == static_cast<double>(world.size()));
}

// Collectives that MPI matches although they mean different things (same sizes, another label)
// are found by comparing the ranks' logs, and reported the same on every rank.
BOOST_AUTO_TEST_CASE(check_collectives_names_the_first_difference_and_both_ranks) {
  MpiComm world(test::session());
  std::vector<float> x(10, 1.0f);
  world.allreduce_sum(x);
  world.broadcast(x, 0);
  world.barrier();
  BOOST_CHECK_NO_THROW(world.check_collectives("agreement"));

  // A new communicator: without PTRAIN_DEBUG_COLLECTIVES=1 only the first check has a log.
  MpiComm other(test::session());
  const int last = other.size() - 1;
  other.allreduce_sum(x);
  other.label_next_collective(other.rank() == last ? "bucket 1" : "bucket 0");
  other.allreduce_sum(x);
  BOOST_CHECK_EXCEPTION(other.check_collectives("a test"), Error, [&](const Error& e) {
    const std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    return what.find("the ranks started different collectives (checked at a test)") != std::string::npos &&
           what.find("is '#2 allreduce_sum of 10 float (bucket 0)' on rank 0 but '#2 allreduce_sum of 10 float "
                     "(bucket 1)' on rank " + std::to_string(last)) != std::string::npos &&
           what.find("(after '#1 allreduce_sum of 10 float', the same on every rank)") != std::string::npos;
  });
}

// A rank a whole step ahead starts the same collectives; the step's name in the check tells them apart.
BOOST_AUTO_TEST_CASE(check_collectives_finds_a_rank_a_step_ahead) {
  MpiComm world(test::session());
  std::vector<double> x(3, 1.0);
  const int last = world.size() - 1;
  world.allreduce_sum(x);
  const std::string step = world.rank() == last ? "step 2" : "step 1";
  BOOST_CHECK_EXCEPTION(world.check_collectives(step), Error, [&](const Error& e) {
    const std::string what = e.what();
    return what.find("is 'check at step 1' on rank 0 but 'check at step 2' on rank " + std::to_string(last)) !=
           std::string::npos;
  });
}

// PTRAIN_COLLECTIVE_TIMEOUT is checked when a communicator is made, with the variable named.
BOOST_AUTO_TEST_CASE(a_malformed_collective_timeout_is_refused_by_name) {
  MpiComm world(test::session());
  for (const char* value : {"abc", "0", "-3", "5s"}) {
    ::setenv("PTRAIN_COLLECTIVE_TIMEOUT", value, 1);
    BOOST_CHECK_EXCEPTION(MpiComm(test::session()), Error, [&](const Error& e) {
      return std::string(e.what()) == std::string("PTRAIN_COLLECTIVE_TIMEOUT='") + value +
                                          "' is not a number of seconds in (0, 1e9]; it bounds how long a rank waits "
                                          "for the others in a collective";
    });
  }
  ::unsetenv("PTRAIN_COLLECTIVE_TIMEOUT");
  BOOST_TEST(collective_timeout_seconds() == 300.0);
  ::setenv("PTRAIN_COLLECTIVE_TIMEOUT", "2.5", 1);
  BOOST_TEST(collective_timeout_seconds() == 2.5);
  ::unsetenv("PTRAIN_COLLECTIVE_TIMEOUT");
  world.barrier();
}

BOOST_AUTO_TEST_SUITE_END()
