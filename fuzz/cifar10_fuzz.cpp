// CIFAR-10 binary records (a label byte and 3072 pixel bytes each).
#include "fuzz_input.hpp"
#include "ptrain/data/cifar10.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ptrain::fuzz::input_file(data, size, "data_batch_1.bin");
  return ptrain::fuzz::refuse_cleanly([&] { ptrain::read_cifar10_files({path}); });
}
