// A safetensors file: the 8-byte header length, the JSON header (dtypes, shapes, data offsets,
// __metadata__), then every tensor read and converted to float.
#include "fuzz_input.hpp"
#include "ptrain/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ptrain::fuzz::input_file(data, size, "model.safetensors");
  return ptrain::fuzz::refuse_cleanly([&] { ptrain::io::SafetensorsFile(path).read_all<float>(); });
}
