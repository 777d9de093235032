#pragma once
// Whether every rank holds the same sequence of descriptions (a model's parameters, the
// collectives started since the last check), and if not, the first difference, reported the same
// on every rank. Each rank hashes its entries; the hashes are gathered; the first entry where
// some rank differs from rank 0 is sent, as text, from both ranks to all. The values travel as
// host values (comm/host_values.hpp), so a communicator of device memory (NcclComm) works too.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
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

// Sends root's text (truncated to a fixed length) to every rank; doubles carry the bytes because
// the communicators move floating-point types.
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

// What a difference is called in the message:
//   "<subject>: entry #3 is 'A' on rank 0 but 'B' on rank 2 (after '<entry #2>', the same on every rank)<hint>"
struct SequenceWords {
  const char* subject;  // "DataParallel: the model differs between ranks"
  const char* missing;  // what a rank with fewer entries shows in their place
  const char* hint;     // "; every rank must build the same model"
};

template <Communicator C>
void check_same_sequence(C& comm, const std::vector<std::string>& entries, const SequenceWords& words) {
  const int ranks = comm.size();
  std::vector<double> counts(static_cast<std::size_t>(ranks));
  const double mine = static_cast<double>(entries.size());
  host_allgather(comm, std::span<const double>(&mine, 1), std::span<double>(counts));
  std::size_t longest = 0;
  for (double c : counts) longest = std::max(longest, static_cast<std::size_t>(c));

  std::vector<double> hashes(longest, -1.0), all(longest * static_cast<std::size_t>(ranks));
  for (std::size_t i = 0; i < entries.size(); ++i) hashes[i] = fnv1a(entries[i]);
  host_allgather(comm, std::span<const double>(hashes), std::span<double>(all));

  for (std::size_t i = 0; i < longest; ++i)
    for (int r = 1; r < ranks; ++r) {
      if (all[static_cast<std::size_t>(r) * longest + i] == all[i]) continue;
      const auto describe = [&](int rank) {
        return broadcast_text(comm, i < entries.size() ? entries[i] : std::string(words.missing), rank);
      };
      const std::string on_root = describe(0), on_other = describe(r);
      const std::string after = i == 0 ? "" : " (after '" + entries[i - 1] + "', the same on every rank)";
      fail(words.subject, ": entry #", i, " is '", on_root, "' on rank 0 but '", on_other, "' on rank ", r, after,
           words.hint);
    }
}

}  // namespace ptrain::detail
