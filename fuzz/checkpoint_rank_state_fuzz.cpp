// A training checkpoint's rank-N.txt: the rank's RNG engine state and the running sums of the
// epoch in progress (train/checkpoint.hpp).
#include "fuzz_input.hpp"
#include "ptrain/train/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ptrain::fuzz::input_file(data, size, "rank-0.txt");
  return ptrain::fuzz::refuse_cleanly([&] { ptrain::checkpoint::read_rank_state(path); });
}
