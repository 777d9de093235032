#pragma once
// Every rank must hold the same parameters and buffers, with the same names and shapes, in the
// same order: data parallelism reduces them by position. Each rank hashes the description of
// each entry; the hashes are gathered; the first entry where some rank differs from rank 0 is
// reported identically on every rank. The values travel as host values (comm/host_values.hpp),
// so a communicator of device memory (NcclComm) checks the model as well.
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/host_values.hpp"
#include "ptrain/core/error.hpp"

namespace ptrain::detail {

inline std::uint32_t fnv1a(const std::string& text) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return h;
}

// Sends root's description (truncated to a fixed length) to every rank; doubles carry the bytes
// because the communicators move floating-point types.
template <Communicator C>
std::string broadcast_text(C& comm, const std::string& text, int root) {
  constexpr std::size_t capacity = 200;
  std::vector<double> buffer(capacity + 1, 0.0);
  if (comm.rank() == root) {
    const std::size_t n = std::min(text.size(), capacity);
    buffer[0] = static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) buffer[i + 1] = static_cast<unsigned char>(text[i]);
  }
  host_broadcast(comm, std::span<double>(buffer), root);
  std::string out(static_cast<std::size_t>(buffer[0]), ' ');
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(static_cast<int>(buffer[i + 1]));
  return out;
}

// descriptions: one line per parameter or buffer, e.g. "param layer1.0.conv1.weight [64, 64, 3, 3]".
template <Communicator C>
void check_same_model(C& comm, const std::vector<std::string>& descriptions, const char* who) {
  const int ranks = comm.size();
  std::vector<double> counts(static_cast<std::size_t>(ranks));
  const double mine = static_cast<double>(descriptions.size());
  host_allgather(comm, std::span<const double>(&mine, 1), std::span<double>(counts));
  std::size_t longest = 0;
  for (double c : counts) longest = std::max(longest, static_cast<std::size_t>(c));

  std::vector<double> hashes(longest, -1.0), all(longest * static_cast<std::size_t>(ranks));
  for (std::size_t i = 0; i < descriptions.size(); ++i) hashes[i] = fnv1a(descriptions[i]);
  host_allgather(comm, std::span<const double>(hashes), std::span<double>(all));

  for (std::size_t i = 0; i < longest; ++i)
    for (int r = 1; r < ranks; ++r) {
      if (all[static_cast<std::size_t>(r) * longest + i] == all[i]) continue;
      const auto describe = [&](int rank) {
        const std::string local = i < descriptions.size() ? descriptions[i] : "nothing (its model has fewer entries)";
        return broadcast_text(comm, local, rank);
      };
      const std::string on_root = describe(0), on_other = describe(r);
      fail(who, ": the model differs between ranks: entry #", i, " is '", on_root, "' on rank 0 but '", on_other,
           "' on rank ", r, "; every rank must build the same model");
    }
}

}  // namespace ptrain::detail
