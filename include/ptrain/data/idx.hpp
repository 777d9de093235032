#pragma once
// IDX files (MNIST, Fashion-MNIST): a big-endian magic number 0x000008NN (unsigned bytes, NN
// dimensions), NN big-endian uint32 extents, then the bytes. Plain or gzip-compressed; gzip is
// recognised by its magic bytes (1f 8b) and read through zlib. Images become floats in [0, 1].
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/detail/byte_reader.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

namespace detail {

inline const char* idx_type_name(unsigned code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0b: return "short";
    case 0x0c: return "int";
    case 0x0d: return "float";
    case 0x0e: return "double";
    default: return "unknown type";
  }
}

inline std::string hex32(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

inline std::string describe_magic(std::uint32_t magic) {
  if ((magic >> 16) != 0) return hex32(magic) + " (not an IDX file)";
  const unsigned dims = magic & 0xff;
  return hex32(magic) + " (" + idx_type_name((magic >> 8) & 0xff) + ", " + std::to_string(dims) +
         (dims == 1 ? " dim)" : " dims)");
}

inline std::uint32_t big_endian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// Reads and checks the magic number and the extents of an unsigned-byte IDX file of `dims` dims.
inline std::vector<std::int64_t> read_idx_header(ByteReader& in, unsigned dims) {
  const std::uint32_t expected = 0x0800u | dims;
  unsigned char magic[4];
  const std::size_t got = in.read(magic, 4);
  check(got == 4, in.name(), ": truncated at offset ", got, ": expected the 4-byte IDX magic ",
        describe_magic(expected), ", got ", got, " bytes", in.end_reason());
  const std::uint32_t value = big_endian32(magic);
  check(value == expected, in.name(), ": offset 0: expected IDX magic ", describe_magic(expected), ", got ",
        describe_magic(value));
  std::vector<unsigned char> raw(4 * dims);
  const std::size_t got_dims = in.read(raw.data(), raw.size());
  check(got_dims == raw.size(), in.name(), ": truncated at offset ", in.offset(), ": expected ", raw.size(),
        " bytes of header (", dims, " big-endian uint32 extents), got ", got_dims, in.end_reason());
  std::vector<std::int64_t> extents(dims);
  for (unsigned d = 0; d < dims; ++d) extents[d] = big_endian32(raw.data() + 4 * d);
  return extents;
}

// Reads exactly `count` bytes of payload, then checks that the file ends there.
inline std::vector<unsigned char> read_idx_payload(ByteReader& in, std::uint64_t count, const char* what,
                                                   const std::string& layout) {
  std::vector<unsigned char> bytes;
  // Grow with the data actually read (doubling from 64 KiB up to 16 MiB a read), so a corrupt
  // header claiming terabytes fails as truncated, after an allocation the size of the file.
  constexpr std::uint64_t first_chunk = 64u << 10, largest_chunk = 16u << 20;
  const std::uint64_t start = in.offset();
  std::uint64_t done = 0;
  while (done < count) {
    const std::uint64_t want = std::min({std::max(first_chunk, std::min(done, largest_chunk)), count - done});
    bytes.resize(static_cast<std::size_t>(done + want));
    const std::size_t got = in.read(bytes.data() + done, static_cast<std::size_t>(want));
    done += got;
    if (got < want) break;
  }
  check(done == count, in.name(), ": truncated at offset ", start + done, ": expected ", count, " bytes of ",
        what, " (", layout, "), got ", done, in.end_reason());
  unsigned char extra = 0;
  check(in.read(&extra, 1) == 0, in.name(), ": offset ", start + count,
        ": expected the end of the file after ", layout, ", found more data");
  return bytes;
}

}  // namespace detail

// Images of an IDX3 file (magic 0x00000803, extents N, rows, cols) as [N, 1, rows, cols] in [0, 1].
inline Tensor<float> read_idx_images(const std::filesystem::path& path) {
  detail::ByteReader in(path);
  const auto dims = detail::read_idx_header(in, 3);
  const std::int64_t n = dims[0], rows = dims[1], cols = dims[2];
  check(rows > 0 && cols > 0, in.name(), ": offset ", rows > 0 ? 12 : 8,
        ": expected positive image extents, got ", rows, " x ", cols);
  const auto pixels = static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols);
  check(static_cast<std::uint64_t>(n) <= (std::uint64_t{1} << 62) / pixels, in.name(),
        ": offset 4: expected extents whose product fits in memory, got ", n, " x ", rows, " x ", cols);
  const std::uint64_t count = static_cast<std::uint64_t>(n) * pixels;
  const std::string layout =
      std::to_string(n) + " images of " + std::to_string(rows) + "x" + std::to_string(cols);
  const auto bytes = detail::read_idx_payload(in, count, "image data", layout);

  std::array<float, 256> scale{};
  for (int v = 0; v < 256; ++v) scale[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
  Tensor<float> images(Shape{n, 1, rows, cols});
  float* out = images.data();
  for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = scale[bytes[i]];
  return images;
}

// Labels of an IDX1 file (magic 0x00000801, extent N), each checked to lie in [0, num_classes).
inline std::vector<std::int64_t> read_idx_labels(const std::filesystem::path& path,
                                                 std::int64_t num_classes = 256) {
  detail::ByteReader in(path);
  const std::int64_t n = detail::read_idx_header(in, 1)[0];
  const auto bytes = detail::read_idx_payload(in, static_cast<std::uint64_t>(n), "label data",
                                              std::to_string(n) + " labels");
  std::vector<std::int64_t> labels(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    check(bytes[i] < num_classes, in.name(), ": offset ", 8 + i, ": label ", int{bytes[i]},
          " out of range: expected 0..", num_classes - 1);
    labels[i] = bytes[i];
  }
  return labels;
}

// An images file and its labels file as one dataset; the counts must agree.
inline TensorDataset read_idx_dataset(const std::filesystem::path& images_path,
                                      const std::filesystem::path& labels_path, std::int64_t num_classes) {
  Tensor<float> images = read_idx_images(images_path);
  std::vector<std::int64_t> labels = read_idx_labels(labels_path, num_classes);
  check(static_cast<std::int64_t>(labels.size()) == images.size(0), labels_path.string(),
        ": offset 4: expected ", images.size(0), " labels (the image count of ", images_path.string(),
        "), got ", labels.size());
  return TensorDataset(std::move(images), std::move(labels));
}

namespace detail {
// The gzip file if present, else the uncompressed one.
inline std::filesystem::path idx_file(const std::filesystem::path& root, const std::string& stem,
                                      const char* dataset, const char* hint) {
  const auto gz = root / (stem + ".gz");
  const auto plain = root / stem;
  if (std::filesystem::exists(gz)) return gz;
  if (std::filesystem::exists(plain)) return plain;
  fail(dataset, ": found neither ", gz.string(), " nor ", plain.string(),
       ": expected the dataset's IDX files in ", root.string(), " (", hint, ")");
}

inline TensorDataset read_mnist_layout(const std::filesystem::path& root, Split split, const char* dataset,
                                       const char* hint) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const auto images = idx_file(root, prefix + "-images-idx3-ubyte", dataset, hint);
  const auto labels = idx_file(root, prefix + "-labels-idx1-ubyte", dataset, hint);
  return read_idx_dataset(images, labels, 10);
}
}  // namespace detail

// Fashion-MNIST: 28x28 grey images of clothes, 10 classes, 60000 train / 10000 test.
// The default root is where Debian's dataset-fashion-mnist package installs it.
class FashionMnist : public TensorDataset {
 public:
  static constexpr const char* default_root = "/usr/share/datasets/fashion-mnist";
  static constexpr std::int64_t num_classes = 10;
  static constexpr std::array<const char*, 10> class_names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

  explicit FashionMnist(Split split = Split::train, const std::filesystem::path& root = default_root)
      : TensorDataset(detail::read_mnist_layout(
            root, split, "FashionMnist", "pass another root, or on Debian install dataset-fashion-mnist")) {}
};

// MNIST handwritten digits: the same files and layout as Fashion-MNIST.
class Mnist : public TensorDataset {
 public:
  static constexpr const char* default_root = "/usr/share/datasets/mnist";
  static constexpr std::int64_t num_classes = 10;

  explicit Mnist(Split split = Split::train, const std::filesystem::path& root = default_root)
      : TensorDataset(detail::read_mnist_layout(root, split, "Mnist",
                                                "pass the directory holding the four MNIST files")) {}
};

}  // namespace ptrain
