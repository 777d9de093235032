#pragma once
// The Communicator concept: what DataParallel and the other parallel policies need from a
// group of ranks. Models: MpiComm (ptrain/comm/mpi_comm.hpp, MPICH) and SelfComm (a world of
// one, ptrain/comm/self_comm.hpp). This comment is the one place the contract is written down;
// test/comm/communicator_test.cpp compiles an archetype against it.
//
// Element types: float, double, half, bfloat16 (CommScalar). A buffer is anything with
// contiguous storage of one of them: std::span<T>, std::vector<T>, std::array<T, N>, or a CPU
// Tensor<T> (its elements, whatever its shape). Sums of half and bfloat16 add in float and round
// to the element type after each pairwise addition.
//
//   c.rank(), c.size()                      this rank in [0, size), the number of ranks
//   c.allreduce_sum(buf)                    in place: buf = the sum over ranks of buf
//   c.reduce_scatter_sum(send, recv)        send holds size() blocks of recv.size() elements;
//                                           recv = the sum over ranks of block rank()
//   c.allgather(send, recv)                 recv (size() * send.size()) = every rank's send, in
//                                           rank order
//   c.broadcast(buf, root)                  buf = root's buf
//   c.send(buf, dest, tag), c.recv(buf, source, tag)
//                                           point to point; recv needs a message of exactly
//                                           buf.size() elements; tag >= 0
//   c.barrier()                             returns when every rank has entered it
//   c.split(color, key)                     a new communicator of the same type over the ranks
//                                           that gave the same color (>= 0), ordered by key then
//                                           rank; every rank of c must call it
//   c.bytes_sent()                          payload bytes this rank has handed to the wire on c:
//                                           its whole buffer for allreduce_sum, send of
//                                           reduce_scatter_sum and allgather, buf on the root of
//                                           broadcast (0 elsewhere), buf of send; 0 for recv and
//                                           barrier. A count of what the algorithm asked to move,
//                                           exact and the same for every backend (a half buffer
//                                           counts half the bytes of a float one), not the
//                                           transport's own traffic.
//
// Non-blocking forms iallreduce_sum, ireduce_scatter_sum, iallgather, ibroadcast, isend, irecv
// take the same arguments and return a C::Request (CommRequest): wait() blocks until the
// operation is complete, test() says whether it is (and lets it progress: MPI moves the
// bytes of a non-blocking collective only while some MPI call runs, so call test() now and
// then while overlapping). The buffers must stay alive and untouched until then. Destroying
// an unfinished request waits for it, except while an exception unwinds (then waiting could
// hang on a rank that will never come; see run_main).
//
// Collectives are called by every rank of the communicator in the same order with matching
// sizes, as in MPI. Errors (bad sizes, ranks, tags) throw ptrain::Error before anything is sent.
// Communicators are movable, not copyable, and used from one thread at a time.
//
// Buffers are in host memory, except for a communicator that names the device whose memory it
// moves as C::memory (NcclComm: `using memory = Cuda;`, spans over device pointers); see
// comm_memory_t below and comm/host_values.hpp for host values through such a communicator.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <type_traits>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/device/cpu.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

template <class T>
concept CommScalar = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, half> ||
                     std::same_as<T, bfloat16>;

// The element type's name in messages: "float", "double", "half", "bfloat16".
template <CommScalar T>
constexpr const char* comm_scalar_name() {
  if constexpr (std::same_as<T, float>) return "float";
  else if constexpr (std::same_as<T, double>) return "double";
  else if constexpr (std::same_as<T, half>) return "half";
  else return "bfloat16";
}

namespace detail {

template <class R>
  requires std::ranges::contiguous_range<R> && std::ranges::sized_range<R>
auto comm_span(R&& r) {
  return std::span(std::ranges::data(r), std::ranges::size(r));
}
template <class T>
std::span<T> comm_span(Tensor<T, Cpu>& t) {
  return {t.data(), static_cast<std::size_t>(t.numel())};
}
template <class T>
std::span<T> comm_span(Tensor<T, Cpu>&& t) {  // a view returned by value still names shared storage
  return {t.data(), static_cast<std::size_t>(t.numel())};
}
template <class T>
std::span<const T> comm_span(const Tensor<T, Cpu>& t) {
  return {t.data(), static_cast<std::size_t>(t.numel())};
}

}  // namespace detail

// A buffer to send from: contiguous elements of a CommScalar, possibly const.
template <class B>
concept CommBuffer = requires(B&& b) { detail::comm_span(std::forward<B>(b)); } &&
                     CommScalar<std::remove_const_t<typename decltype(detail::comm_span(std::declval<B>()))::element_type>>;

// A buffer to write into: a CommBuffer whose elements are not const.
template <class B>
concept MutableCommBuffer =
    CommBuffer<B> && !std::is_const_v<typename decltype(detail::comm_span(std::declval<B>()))::element_type>;

template <CommBuffer B>
using comm_scalar_t = std::remove_const_t<typename decltype(detail::comm_span(std::declval<B>()))::element_type>;

// The buffer's elements as a span (const when the buffer is).
template <CommBuffer B>
auto as_span(B&& b) {
  return detail::comm_span(std::forward<B>(b));
}

// A handle on a non-blocking operation.
template <class R>
concept CommRequest = std::movable<R> && requires(R& r) {
  { r.wait() } -> std::same_as<void>;
  { r.test() } -> std::same_as<bool>;
};

template <class C, class T>
concept CommunicatorFor = requires(C& c, std::span<T> buf, std::span<const T> in, int peer, int tag) {
  { c.allreduce_sum(buf) } -> std::same_as<void>;
  { c.iallreduce_sum(buf) } -> std::same_as<typename C::Request>;
  { c.reduce_scatter_sum(in, buf) } -> std::same_as<void>;
  { c.ireduce_scatter_sum(in, buf) } -> std::same_as<typename C::Request>;
  { c.allgather(in, buf) } -> std::same_as<void>;
  { c.iallgather(in, buf) } -> std::same_as<typename C::Request>;
  { c.broadcast(buf, peer) } -> std::same_as<void>;
  { c.ibroadcast(buf, peer) } -> std::same_as<typename C::Request>;
  { c.send(in, peer, tag) } -> std::same_as<void>;
  { c.isend(in, peer, tag) } -> std::same_as<typename C::Request>;
  { c.recv(buf, peer, tag) } -> std::same_as<void>;
  { c.irecv(buf, peer, tag) } -> std::same_as<typename C::Request>;
};

template <class C>
concept Communicator =
    std::movable<C> && CommRequest<typename C::Request> &&
    requires(C& c, const C& cc, int color, int key) {
      { cc.rank() } -> std::same_as<int>;
      { cc.size() } -> std::same_as<int>;
      { cc.bytes_sent() } -> std::same_as<std::uint64_t>;
      { c.barrier() } -> std::same_as<void>;
      { c.split(color, key) } -> std::same_as<C>;
    } && CommunicatorFor<C, float> && CommunicatorFor<C, double> && CommunicatorFor<C, half> &&
    CommunicatorFor<C, bfloat16>;

namespace detail {

// The argument checks every communicator makes, with the same messages.
struct CommChecks {
  static void peer(const char* op, int peer, int size, const char* role) {
    check(0 <= peer && peer < size, op, ": ", role, " rank ", peer, " is not in [0, ", size, ")");
  }
  static void tag(const char* op, int tag) { check(tag >= 0, op, ": tag ", tag, " is negative"); }
  static void blocks(const char* op, std::size_t send, std::size_t recv, int size, bool recv_is_whole) {
    // reduce_scatter: send = size * recv; allgather: recv = size * send.
    const std::size_t whole = recv_is_whole ? recv : send, part = recv_is_whole ? send : recv;
    check(whole == part * static_cast<std::size_t>(size), op, ": ", recv_is_whole ? "receive" : "send",
          " buffer holds ", whole, " elements, expected ", size, " ranks x ", part, " = ",
          part * static_cast<std::size_t>(size));
  }
};

}  // namespace detail

// The device whose memory C's buffers are in: C::memory where C names one, else the host (Cpu).
template <class C>
struct CommMemory {
  using type = Cpu;
};
template <class C>
  requires requires { typename C::memory; }
struct CommMemory<C> {
  using type = typename C::memory;
};
template <class C>
using comm_memory_t = typename CommMemory<C>::type;

// The memory a device's tensors live in: the host for Cpu and HostEmulated, else the device's own.
// A communicator moves a model's tensors when comm_memory_t is memory_of_t of the model's device.
template <class D>
using memory_of_t = std::conditional_t<std::is_base_of_v<Cpu, D>, Cpu, D>;

}  // namespace ptrain
