// IDX images and labels (MNIST's format) read from the input as is: plain, or gzip when it starts
// 1f 8b (corrupt gzip streams included).
#include "fuzz_input.hpp"
#include "ptrain/data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ptrain::fuzz::input_file(data, size, "input.idx");
  ptrain::fuzz::refuse_cleanly([&] { ptrain::read_idx_images(path); });
  return ptrain::fuzz::refuse_cleanly([&] { ptrain::read_idx_labels(path, 10); });
}
