// The Communicator concept (ptrain/comm/communicator.hpp), checked against an archetype: the
// least a type must declare to be a Communicator. Generic code written against the concept can
// be compiled with the archetype to show that it uses nothing else.
#include <array>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/communicator.hpp>
#include <ptrain/comm/self_comm.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(communicator_test)

namespace {

struct RequestArchetype {
  void wait() {}
  bool test() { return true; }
};

struct CommunicatorArchetype {
  using Request = RequestArchetype;
  int rank() const { return 0; }
  int size() const { return 1; }
  std::uint64_t bytes_sent() const { return 0; }
  template <MutableCommBuffer B>
  void allreduce_sum(B&&) {}
  template <MutableCommBuffer B>
  Request iallreduce_sum(B&&) { return {}; }
  template <CommBuffer S, MutableCommBuffer R>
  void reduce_scatter_sum(S&&, R&&) {}
  template <CommBuffer S, MutableCommBuffer R>
  Request ireduce_scatter_sum(S&&, R&&) { return {}; }
  template <CommBuffer S, MutableCommBuffer R>
  void allgather(S&&, R&&) {}
  template <CommBuffer S, MutableCommBuffer R>
  Request iallgather(S&&, R&&) { return {}; }
  template <MutableCommBuffer B>
  void broadcast(B&&, int) {}
  template <MutableCommBuffer B>
  Request ibroadcast(B&&, int) { return {}; }
  template <CommBuffer B>
  void send(B&&, int, int) {}
  template <CommBuffer B>
  Request isend(B&&, int, int) { return {}; }
  template <MutableCommBuffer B>
  void recv(B&&, int, int) {}
  template <MutableCommBuffer B>
  Request irecv(B&&, int, int) { return {}; }
  void barrier() {}
  CommunicatorArchetype split(int, int) { return {}; }
};

// Missing one element type: half has no sum.
struct FloatOnlyComm : CommunicatorArchetype {
  template <class B>
    requires std::same_as<comm_scalar_t<B>, float>
  void allreduce_sum(B&&) {}
};

// split returns another type.
struct WrongSplit : CommunicatorArchetype {
  CommunicatorArchetype split(int, int) { return {}; }
};

// Generic code that uses the concept and nothing else.
template <Communicator C>
void average(C& comm, std::vector<float>& gradient) {
  comm.allreduce_sum(gradient);
  for (float& g : gradient) g /= static_cast<float>(comm.size());
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_archetype_and_self_comm_model_the_concept_and_incomplete_types_do_not) {
  static_assert(Communicator<CommunicatorArchetype>);
  static_assert(Communicator<SelfComm>);
  static_assert(!Communicator<FloatOnlyComm>);
  static_assert(!Communicator<WrongSplit>);
  static_assert(!Communicator<int>);
  std::vector<float> g{2, 4};
  CommunicatorArchetype archetype;
  average(archetype, g);
  BOOST_TEST(g == (std::vector<float>{2, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(buffers_are_contiguous_ranges_and_tensors_of_the_four_scalars) {
  static_assert(MutableCommBuffer<std::vector<float>&>);
  static_assert(MutableCommBuffer<std::span<half>>);
  static_assert(MutableCommBuffer<std::array<ptrain::bfloat16, 3>&>);
  static_assert(MutableCommBuffer<Tensor<double>&>);
  static_assert(CommBuffer<const std::vector<float>&>);
  static_assert(CommBuffer<std::span<const float>>);
  static_assert(!MutableCommBuffer<const std::vector<float>&>);
  static_assert(!MutableCommBuffer<std::span<const float>>);
  static_assert(!CommBuffer<std::vector<int>&>);
  static_assert(!CommBuffer<std::vector<long double>&>);
  static_assert(std::same_as<comm_scalar_t<const std::vector<half>&>, half>);
  std::vector<float> v{1, 2, 3};
  auto s = as_span(v);
  BOOST_TEST(s.data() == v.data());
  BOOST_TEST(s.size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
