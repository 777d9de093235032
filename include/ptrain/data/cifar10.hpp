#pragma once
// CIFAR-10, binary version (cifar-10-batches-bin): data_batch_1.bin .. data_batch_5.bin (train) and
// test_batch.bin, each a run of 3073-byte records: a label byte, then the 32x32 red, green and blue
// planes. Images become [3, 32, 32] floats in [0, 1].
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/detail/byte_reader.hpp"
#include "ptrain/io/pixels.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

// The records of CIFAR-10 binary files, in file order, as one dataset.
TensorDataset read_cifar10_files(const std::vector<std::filesystem::path>& files);

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE TensorDataset read_cifar10_files(const std::vector<std::filesystem::path>& files) {
  constexpr std::size_t pixels = 3 * 32 * 32, record = 1 + pixels;
  std::vector<std::uint8_t> bytes;  // the pixels of every record, then converted at once
  std::vector<std::int64_t> labels;
  for (const auto& path : files) {
    detail::ByteReader in(path);
    std::array<std::uint8_t, record> buffer;
    for (std::int64_t r = 0;; ++r) {
      const std::uint64_t offset = in.offset();
      const std::size_t got = in.read(buffer.data(), record);
      if (got == 0) {
        check(r > 0, in.name(), ": empty: expected 3073-byte CIFAR-10 records (a label byte and 3072 pixel bytes)");
        break;
      }
      check(got == record, in.name(), ": record ", r, " at offset ", offset, " is truncated: expected ", record,
            " bytes (a label byte and 3072 pixel bytes), got ", got, in.end_reason());
      check(buffer[0] < 10, in.name(), ": record ", r, " at offset ", offset, ": label ", int{buffer[0]},
            " out of range: expected 0..9");
      labels.push_back(buffer[0]);
      bytes.insert(bytes.end(), buffer.begin() + 1, buffer.end());
    }
  }
  const auto n = static_cast<std::int64_t>(labels.size());
  Tensor<float> images(Shape{n, 3, 32, 32});
  const auto& scale = io::detail::unit_scale();
  float* out = images.data();
  for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = scale[bytes[i]];
  return TensorDataset(std::move(images), std::move(labels));
}
#endif

// 60000 32x32 colour images of 10 classes: 50000 train (five files), 10000 test.
class Cifar10 : public TensorDataset {
 public:
  static constexpr std::int64_t num_classes = 10;
  static constexpr std::array<const char*, 10> class_names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                              "dog",      "frog",       "horse", "ship", "truck"};

  // root: the directory holding the .bin files (cifar-10-batches-bin once the archive is unpacked).
  explicit Cifar10(const std::filesystem::path& root, Split split = Split::train)
      : TensorDataset(read_cifar10_files(files(root, split))) {}

  static std::vector<std::filesystem::path> files(const std::filesystem::path& root, Split split) {
    std::vector<std::filesystem::path> paths;
    if (split == Split::test)
      paths.push_back(root / "test_batch.bin");
    else
      for (int k = 1; k <= 5; ++k) paths.push_back(root / ("data_batch_" + std::to_string(k) + ".bin"));
    for (const auto& p : paths)
      check(std::filesystem::exists(p), "Cifar10: ", p.string(), " not found: expected the binary version's ",
            split == Split::test ? "test_batch.bin" : "data_batch_1.bin .. data_batch_5.bin", " in ", root.string(),
            " (cifar-10-batches-bin)");
    return paths;
  }
};

}  // namespace ptrain
