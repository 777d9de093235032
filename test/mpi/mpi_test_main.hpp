#pragma once
// The multi-rank tests run as Boost.Test programs inside one MpiSession per process (see
// main.cpp); test cases reach the session through this accessor.
#include <cstdint>

#include <ptrain/launch/mpi_session.hpp>

namespace ptrain::test {
MpiSession& session();
// A test's global batch: `base` rows on up to 4 ranks (what the tests were written for), else
// `per_rank` rows a rank (8 and 16 ranks: entries labelled large_world).
inline std::int64_t global_batch_for(std::int64_t base, std::int64_t per_rank) {
  const int n = session().world_size();
  return n <= 4 ? base : per_rank * n;
}
}
