// IDX images and labels read through zlib: the input is gzip-compressed before it is written, so
// the fuzzer mutates the IDX structure itself while every read goes through the gzip path.
#include <zlib.h>

#include "fuzz_input.hpp"
#include "ptrain/data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ptrain::fuzz::scratch() / "input.idx.gz";
  gzFile out = gzopen(path.c_str(), "wb1");
  if (!out) return 0;
  if (size) gzwrite(out, data, static_cast<unsigned>(size));
  gzclose(out);
  ptrain::fuzz::refuse_cleanly([&] { ptrain::read_idx_images(path); });
  return ptrain::fuzz::refuse_cleanly([&] { ptrain::read_idx_labels(path, 10); });
}
