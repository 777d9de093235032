// ptrain_rank_guard PROGRAM ARGS...: runs one rank and, when a signal kills it, says which rank
// and host it was (see ptrain/launch/rank_guard.hpp).
#include <cstddef>
#include <span>

#include <ptrain/launch/rank_guard.hpp>

int main(int argc, char** argv) {
  return ptrain::run_rank_guard(std::span<char*>(argv + 1, static_cast<std::size_t>(argc - 1)));
}
