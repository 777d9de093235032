#pragma once
// Checks of every Communicator operation against the result computed serially: each rank can
// compute every other rank's input (a function of rank and index), so each knows the answer.
// Used by test/comm (SelfComm, a world of one) and test/mpi (MpiComm under mpiexec -n 2 and 3).
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/communicator.hpp>
#include <ptrain/core/half.hpp>

namespace ptrain::test {

// Small integers: exact in every element type, and so are their sums over a few ranks.
inline float exact_input(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1) - 3 * static_cast<int>(i % 3));
}

// A deterministic value in [-1, 1) from (seed, rank, i): splitmix64.
inline float random_input(int rank, std::size_t i, std::uint64_t seed = 1) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(rank) * 0xbf58476d1ce4e5b9ull + i;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

template <class T>
double epsilon() {
  if constexpr (std::is_same_v<T, half>) return 9.765625e-4;  // 2^-10
  else if constexpr (std::is_same_v<T, bfloat16>) return 7.8125e-3;  // 2^-7
  else return std::numeric_limits<T>::epsilon();
}

template <class T>
double as_double(T x) {
  if constexpr (is_reduced_float_v<T>) return static_cast<double>(static_cast<float>(x));
  else return static_cast<double>(x);
}

template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  std::vector<double> out;
  for (const T& x : v) out.push_back(as_double(x));
  return out;
}

template <class T>
std::vector<T> inputs(int rank, std::size_t n, bool exact, std::size_t offset = 0) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(exact ? exact_input(rank, offset + i) : random_input(rank, offset + i));
  return v;
}

// "" when got[i] == expected[i] within tol * (1 + |expected[i]|) for all i; else the first miss.
template <class T>
std::string compare(const std::vector<T>& got, const std::vector<double>& expected, double tol, const char* what) {
  if (got.size() != expected.size()) return std::string(what) + ": size " + std::to_string(got.size());
  std::size_t misses = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(as_double(got[i]) - expected[i]) <= tol * (1.0 + std::abs(expected[i])))) {
      if (misses++ == 0) first = i;
    }
  }
  if (misses == 0) return "";
  std::ostringstream out;
  out.precision(10);
  out << what << " (" << scalar_name<T> << "): " << misses << " of " << got.size() << " elements differ, first at "
      << first << ": got " << as_double(got[first]) << ", expected " << expected[first] << " (tolerance "
      << tol << ")";
  return out.str();
}

// The sum over ranks of each input, computed serially from the inputs as rounded to T.
template <class T>
std::vector<double> serial_sum(int size, std::size_t n, bool exact, std::size_t offset = 0) {
  std::vector<double> sum(n, 0.0);
  for (int r = 0; r < size; ++r) {
    const auto v = inputs<T>(r, n, exact, offset);
    for (std::size_t i = 0; i < n; ++i) sum[i] += as_double(v[i]);
  }
  return sum;
}

// Every pairwise sum rounds to T: allow one rounding per rank, relative to the magnitudes.
template <class T>
double sum_tolerance(int size, bool exact) {
  return exact ? 0.0 : 2.0 * size * epsilon<T>();
}

template <Communicator C, CommScalar T>
void check_allreduce(C& comm, std::size_t n, bool nonblocking) {
  for (bool exact : {true, false}) {
    auto data = inputs<T>(comm.rank(), n, exact);
    if (nonblocking) {
      auto request = comm.iallreduce_sum(data);
      request.wait();
      BOOST_TEST(request.test());
    } else {
      comm.allreduce_sum(data);
    }
    const auto msg = compare(data, serial_sum<T>(comm.size(), n, exact), sum_tolerance<T>(comm.size(), exact),
                             nonblocking ? "iallreduce_sum" : "allreduce_sum");
    BOOST_TEST(msg.empty(), msg << " (n " << n << (exact ? ", integers" : ", random") << ")");
  }
}

template <Communicator C, CommScalar T>
void check_reduce_scatter(C& comm, std::size_t block, bool nonblocking) {
  const auto size = static_cast<std::size_t>(comm.size());
  for (bool exact : {true, false}) {
    const auto send = inputs<T>(comm.rank(), block * size, exact);
    std::vector<T> recv(block);
    if (nonblocking)
      comm.ireduce_scatter_sum(send, recv).wait();
    else
      comm.reduce_scatter_sum(send, recv);
    const auto expected = serial_sum<T>(comm.size(), block, exact, block * static_cast<std::size_t>(comm.rank()));
    const auto msg = compare(recv, expected, sum_tolerance<T>(comm.size(), exact),
                             nonblocking ? "ireduce_scatter_sum" : "reduce_scatter_sum");
    BOOST_TEST(msg.empty(), msg << " (block " << block << ")");
  }
}

template <Communicator C, CommScalar T>
void check_allgather(C& comm, std::size_t n, bool nonblocking) {
  const auto send = inputs<T>(comm.rank(), n, false);
  std::vector<T> recv(n * static_cast<std::size_t>(comm.size()));
  if (nonblocking)
    comm.iallgather(send, recv).wait();
  else
    comm.allgather(send, recv);
  std::vector<double> expected;
  for (int r = 0; r < comm.size(); ++r)
    for (double x : as_doubles(inputs<T>(r, n, false))) expected.push_back(x);
  const auto msg = compare(recv, expected, 0.0, nonblocking ? "iallgather" : "allgather");
  BOOST_TEST(msg.empty(), msg << " (n " << n << ")");
}

template <Communicator C, CommScalar T>
void check_broadcast(C& comm, std::size_t n, int root, bool nonblocking) {
  auto data = inputs<T>(comm.rank(), n, false);
  if (nonblocking)
    comm.ibroadcast(data, root).wait();
  else
    comm.broadcast(data, root);
  const auto msg = compare(data, as_doubles(inputs<T>(root, n, false)), 0.0, nonblocking ? "ibroadcast" : "broadcast");
  BOOST_TEST(msg.empty(), msg << " (root " << root << ")");
}

// Two collectives in flight at once, finished in the opposite order to their start.
template <Communicator C, CommScalar T>
void check_overlap(C& comm, std::size_t n) {
  auto a = inputs<T>(comm.rank(), n, true);
  auto b = inputs<T>(comm.rank(), n, false);
  const auto send = inputs<T>(comm.rank(), n, true);
  std::vector<T> gathered(n * static_cast<std::size_t>(comm.size()));
  auto first = comm.iallreduce_sum(a);
  auto second = comm.iallreduce_sum(b);
  auto third = comm.iallgather(send, gathered);
  while (!third.test()) {
  }
  second.wait();
  first.wait();
  auto msg = compare(a, serial_sum<T>(comm.size(), n, true), 0.0, "overlapped iallreduce_sum (first)");
  BOOST_TEST(msg.empty(), msg);
  msg = compare(b, serial_sum<T>(comm.size(), n, false), sum_tolerance<T>(comm.size(), false),
                "overlapped iallreduce_sum (second)");
  BOOST_TEST(msg.empty(), msg);
  std::vector<double> expected;
  for (int r = 0; r < comm.size(); ++r)
    for (double x : as_doubles(inputs<T>(r, n, true))) expected.push_back(x);
  msg = compare(gathered, expected, 0.0, "overlapped iallgather");
  BOOST_TEST(msg.empty(), msg);
}

// Each rank sends to the next and receives from the previous (a ring), non-blocking; then a
// chain 0 -> 1 -> ... of blocking calls; then two tags received in the opposite order.
template <Communicator C, CommScalar T>
void check_send_recv(C& comm, std::size_t n) {
  const int rank = comm.rank(), size = comm.size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  {
    const auto out = inputs<T>(rank, n, false);
    std::vector<T> in(n);
    auto receive = comm.irecv(in, prev, 11);
    auto send = comm.isend(out, next, 11);
    receive.wait();
    send.wait();
    const auto msg = compare(in, as_doubles(inputs<T>(prev, n, false)), 0.0, "isend/irecv ring");
    BOOST_TEST(msg.empty(), msg);
  }
  {
    std::vector<T> value(n, static_cast<T>(0.0f));
    if (rank == 0) value = inputs<T>(0, n, true);
    else comm.recv(value, rank - 1, 12);
    if (rank + 1 < size) comm.send(value, rank + 1, 12);
    else if (size == 1) {  // to oneself: a blocking send of a long message would wait forever
      const std::vector<T> sent = value;
      auto request = comm.isend(sent, 0, 12);
      comm.recv(value, 0, 12);
      request.wait();
    }
    const auto msg = compare(value, as_doubles(inputs<T>(0, n, true)), 0.0, "blocking send/recv chain");
    BOOST_TEST(msg.empty(), msg);
  }
  {
    const auto one = inputs<T>(rank, n, true), two = inputs<T>(rank + 10, n + 1, true);
    auto s1 = comm.isend(one, next, 1);
    auto s2 = comm.isend(two, next, 2);
    std::vector<T> got_two(n + 1), got_one(n);
    comm.recv(got_two, prev, 2);
    comm.recv(got_one, prev, 1);
    s1.wait();
    s2.wait();
    auto msg = compare(got_one, as_doubles(inputs<T>(prev, n, true)), 0.0, "tag 1 received after tag 2");
    BOOST_TEST(msg.empty(), msg);
    msg = compare(got_two, as_doubles(inputs<T>(prev + 10, n + 1, true)), 0.0, "tag 2 received before tag 1");
    BOOST_TEST(msg.empty(), msg);
  }
}

// bytes_sent counts exactly: on a fresh communicator, each operation adds its payload.
template <Communicator C>
void check_bytes_sent(C& comm) {
  C fresh = comm.split(0, comm.rank());
  const std::uint64_t parent_before = comm.bytes_sent();
  BOOST_TEST(fresh.bytes_sent() == 0u);
  const std::size_t n = 1000, size = static_cast<std::size_t>(fresh.size());
  std::vector<float> f(n, 1.0f);
  std::vector<half> h(n, half(1.0f));
  fresh.allreduce_sum(f);
  const std::uint64_t after_float = fresh.bytes_sent();
  fresh.allreduce_sum(h);
  const std::uint64_t half_bytes = fresh.bytes_sent() - after_float;
  BOOST_TEST(after_float == n * sizeof(float));
  BOOST_TEST(half_bytes == n * sizeof(half));
  BOOST_TEST(2 * half_bytes == after_float);  // fp16 moves half the bytes of fp32

  std::uint64_t expected = fresh.bytes_sent();
  std::vector<bfloat16> b(n * size);
  std::vector<bfloat16> part(n);
  fresh.iallreduce_sum(b).wait();
  expected += n * size * 2;
  fresh.reduce_scatter_sum(b, part);
  expected += n * size * 2;
  std::vector<double> d(3), all(3 * size);
  fresh.allgather(d, all);
  expected += 3 * 8;
  fresh.broadcast(d, 0);
  if (fresh.rank() == 0) expected += 3 * 8;
  fresh.barrier();
  BOOST_TEST(fresh.bytes_sent() == expected);

  const int next = (fresh.rank() + 1) % fresh.size(), prev = (fresh.rank() + fresh.size() - 1) % fresh.size();
  std::vector<float> in(5);
  auto r = fresh.irecv(in, prev, 3);
  fresh.send(std::vector<float>(5, 2.0f), next, 3);
  r.wait();
  expected += 5 * 4;
  BOOST_TEST(fresh.bytes_sent() == expected);
  BOOST_TEST(comm.bytes_sent() == parent_before);  // each communicator counts its own operations
}

}  // namespace ptrain::test
