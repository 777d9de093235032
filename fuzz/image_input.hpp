#pragma once
// The image targets' setup: the pixel limit lowered to 2^22, as libjpeg-turbo's own fuzzers cap
// their images. A small file may legally claim up to io::max_image_pixels (an arithmetic-coded
// JPEG has no bound on pixels per byte), and decoding that many under ASan outlasts the
// fuzzer's timeout; what a fuzzer should find is a claim the limit does not stop.
#include "fuzz_input.hpp"
#include "ptrain/io/image.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ptrain::io::set_image_pixel_limit(1 << 22);
  return 0;
}
