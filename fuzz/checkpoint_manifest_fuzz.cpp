// A training checkpoint's manifest.txt: its format line, then 'key value' lines, each field
// checked (train/checkpoint.hpp).
#include "fuzz_input.hpp"
#include "ptrain/train/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ptrain::fuzz::input_file(data, size, "manifest.txt");
  return ptrain::fuzz::refuse_cleanly([&] { ptrain::checkpoint::Manifest::read(path); });
}
