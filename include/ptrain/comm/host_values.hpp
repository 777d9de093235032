#pragma once
// A few host values (counts, hashes, loss sums) through any communicator: directly when it moves
// host memory, staged through a buffer on its device when it moves device memory only
// (comm_memory_t in comm/communicator.hpp: NcclComm).
#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

namespace detail {
// values copied to a tensor in the communicator's memory, the collective run on it, and the
// result copied back into out.
template <class C, class T, class Collective>
void through_comm_memory(std::span<const T> values, std::span<T> out, std::size_t staged_size,
                         Collective&& collective) {
  using M = comm_memory_t<C>;
  std::vector<T> host(staged_size, T(0));
  std::copy(values.begin(), values.end(), host.begin());
  auto staged_in = Tensor<T, M>::from(Shape{static_cast<std::int64_t>(values.size())},
                                        std::vector<T>(values.begin(), values.end()));
  auto staged_out = Tensor<T, M>::from(Shape{static_cast<std::int64_t>(staged_size)}, host);
  collective(std::span<const T>(staged_in.data(), values.size()), std::span<T>(staged_out.data(), staged_size));
  const std::vector<T> back = staged_out.to_vector();
  std::copy(back.begin(), back.end(), out.begin());
}
}  // namespace detail

template <Communicator C, class T>
void host_allreduce_sum(C& comm, std::span<T> values) {
  if constexpr (std::is_same_v<comm_memory_t<C>, Cpu>) {
    comm.allreduce_sum(values);
  } else {
    detail::through_comm_memory<C>(std::span<const T>(values), values, values.size(),
                                   [&](std::span<const T>, std::span<T> out) { comm.allreduce_sum(out); });
  }
}

template <Communicator C, class T>
void host_broadcast(C& comm, std::span<T> values, int root) {
  if constexpr (std::is_same_v<comm_memory_t<C>, Cpu>) {
    comm.broadcast(values, root);
  } else {
    detail::through_comm_memory<C>(std::span<const T>(values), values, values.size(),
                                   [&](std::span<const T>, std::span<T> out) { comm.broadcast(out, root); });
  }
}

template <Communicator C, class T>
void host_allgather(C& comm, std::span<const T> in, std::span<T> out) {
  if constexpr (std::is_same_v<comm_memory_t<C>, Cpu>) {
    comm.allgather(in, out);
  } else {
    detail::through_comm_memory<C>(in, out, out.size(),
                                   [&](std::span<const T> staged_in, std::span<T> staged_out) {
                                     comm.allgather(staged_in, staged_out);
                                   });
  }
}

}  // namespace ptrain
