// A tensor cache (PTRCACHE header, shapes, then float32 inputs and int64 targets), read whole and
// its first and last examples taken.
#include "fuzz_input.hpp"
#include "ptrain/data/tensor_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ptrain::fuzz::input_file(data, size, "input.cache");
  return ptrain::fuzz::refuse_cleanly([&] {
    const ptrain::TensorCache cache(path);
    if (cache.size() > 0) {
      cache.get(0);
      cache.get(cache.size() - 1);
    }
  });
}
