#pragma once
// A tensor cache: the examples of any dataset, already transformed (decoded, resized), in one
// binary file written atomically, read back whole as a Dataset, so an epoch costs a copy rather
// than decoding every image again. Only deterministic transforms belong in a cache: a random one
// would be drawn once and frozen.
//
// Layout, little-endian: "PTRCACHE", u32 version (1), u32 input rank R, u32 target-map rank M
// (0: one class target per example), u64 example count N, R then M int64 extents; then N records,
// each the input as float32 and the target as int64 (or the target map, M dims, as int64).
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/detail/byte_reader.hpp"
#include "ptrain/data/loader.hpp"
#include "ptrain/data/transforms.hpp"
#include "ptrain/io/atomic_file.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

namespace detail {
inline constexpr std::array<char, 8> cache_magic = {'P', 'T', 'R', 'C', 'A', 'C', 'H', 'E'};
inline constexpr std::uint32_t cache_version = 1;
inline constexpr std::uint64_t cache_fixed_header = 8 + 4 + 4 + 4 + 8;

// Serves a dataset the caller keeps alive, so the loader need not copy it.
template <Dataset D>
struct DatasetRef {
  const D* dataset;
  std::int64_t size() const { return static_cast<std::int64_t>(dataset->size()); }
  Example get(std::int64_t i) const { return dataset->get(i); }
};

template <class T>
void write_raw(std::ostream& out, const T* data, std::size_t count) {
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
}

inline void write_cache_header(std::ostream& out, std::uint64_t count, const Shape& input, const Shape& map) {
  const std::uint32_t ranks[] = {cache_version, static_cast<std::uint32_t>(input.rank()),
                                 static_cast<std::uint32_t>(map.rank())};
  write_raw(out, cache_magic.data(), cache_magic.size());
  write_raw(out, ranks, 3);
  write_raw(out, &count, 1);
  write_raw(out, input.begin(), static_cast<std::size_t>(input.rank()));
  write_raw(out, map.begin(), static_cast<std::size_t>(map.rank()));
}
}  // namespace detail

struct TensorCacheOptions {
  std::int64_t batch_size = 64;  // examples prepared together
  int num_workers = 2;           // threads decoding and transforming (as the DataLoader's)
  std::uint64_t seed = 0;        // the transform's Rng, as a loader's epoch 0
};

// Writes every example of `dataset`, in order, through `transform` (a Transform or PairedTransform,
// applied as a DataLoader would in epoch 0). All transformed examples must have one shape.
template <Dataset D, class T = AnyTransform>
requires Transform<T> || PairedTransform<T>
void write_tensor_cache(const std::filesystem::path& path, const D& dataset, T transform = {},
                        TensorCacheOptions options = {}) {
  const auto count = static_cast<std::int64_t>(dataset.size());
  check(count > 0, path.string(), ": nothing to cache: the dataset is empty");
  LoaderOptions loading;
  loading.batch_size = options.batch_size;
  loading.seed = options.seed;
  loading.num_workers = options.num_workers;
  DataLoader loader(detail::DatasetRef<D>{&dataset}, loading, std::move(transform));
  io::write_atomically(path, [&](std::ostream& out) {
    Shape input, map;
    std::int64_t written = 0;
    for (const Batch& batch : loader) {
      const Shape& shape = batch.inputs.shape();
      const Shape example(shape.begin() + 1, shape.end());
      const Shape example_map(batch.target_shape.begin() + 1, batch.target_shape.end());
      if (written == 0) {
        input = example;
        map = example_map;
        detail::write_cache_header(out, static_cast<std::uint64_t>(count), input, map);
      }
      check(example == input && example_map == map, path.string(), ": example ", batch.indices.front(),
            " transforms to input ", example, " and target map ", example_map, ", expected ", input, " and ", map,
            " like example 0: a cache holds examples of one shape");
      const auto numel = static_cast<std::size_t>(input.numel());
      const std::size_t per_target = map.rank() ? static_cast<std::size_t>(map.numel()) : 1;
      for (std::int64_t r = 0; r < batch.size(); ++r) {
        const auto row = static_cast<std::size_t>(r);
        detail::write_raw(out, batch.inputs.data() + row * numel, numel);
        detail::write_raw(out, batch.targets.data() + row * per_target, per_target);
      }
      written += batch.size();
    }
  });
}

class TensorCache {
 public:
  // With expected_input_shape, a cache of other inputs (written with another transform) is an error.
  explicit TensorCache(const std::filesystem::path& path, std::optional<Shape> expected_input_shape = {}) {
    detail::ByteReader in(path);
    read_header(in);
    if (expected_input_shape)
      check(*expected_input_shape == input_shape_, in.name(), ": holds inputs of shape ", input_shape_, ", expected ",
            *expected_input_shape, " (a cache written with another transform?)");
    // The size is checked before anything is allocated, so a damaged count cannot ask for terabytes.
    const std::uint64_t header = in.offset();
    const double expected_bytes = static_cast<double>(header) + static_cast<double>(count_) * record_bytes();
    const std::uint64_t size = std::filesystem::file_size(path);
    const auto whole = [](double bytes) {  // not a cast to uint64: a damaged header can claim more than 2^64
      char text[48];
      std::snprintf(text, sizeof text, "%.0f", bytes);
      return std::string(text);
    };
    check(static_cast<double>(size) == expected_bytes, in.name(), ": ",
          static_cast<double>(size) < expected_bytes ? "truncated" : "longer than its header says", ": expected ",
          whole(expected_bytes), " bytes (a ", header, "-byte header and ", count_,
          " examples of input ", input_shape_, " float32 and ",
          map_shape_.rank() ? "target map " + map_shape_.str() : std::string("one"), " int64 target, ", whole(record_bytes()),
          " bytes each), found ", size);
    Shape all{count_};
    for (auto e : input_shape_) all.push_back(e);
    inputs_ = Tensor<float>(all);
    const std::size_t per_target = map_shape_.rank() ? static_cast<std::size_t>(map_shape_.numel()) : 1;
    targets_.resize(static_cast<std::size_t>(count_) * per_target);
    const auto numel = static_cast<std::size_t>(input_shape_.numel());
    for (std::size_t i = 0; i < static_cast<std::size_t>(count_); ++i) {
      const std::size_t got = in.read(inputs_.data() + i * numel, numel * sizeof(float)) +
                              in.read(targets_.data() + i * per_target, per_target * sizeof(std::int64_t));
      check(static_cast<double>(got) == record_bytes(), in.name(), ": truncated at offset ", in.offset(),
            " in example ", i, " of ", count_, in.end_reason());
    }
  }

  std::int64_t size() const { return count_; }
  Example get(std::int64_t i) const {
    check(i >= 0 && i < count_, "TensorCache: index ", i, " out of range for ", count_, " examples");
    Example example;
    example.input = inputs_.slice(i, i + 1).reshape(input_shape_);
    const auto row = static_cast<std::size_t>(i);
    if (map_shape_.rank() == 0) {
      example.target = targets_[row];
    } else {
      const auto n = static_cast<std::size_t>(map_shape_.numel());
      example.target_map = Tensor<std::int64_t>(map_shape_);
      std::memcpy(example.target_map.data(), targets_.data() + row * n, n * sizeof(std::int64_t));
    }
    return example;
  }

  const Shape& example_shape() const { return input_shape_; }
  // [H, W] for segmentation caches; rank 0 when each example has one class target.
  const Shape& target_map_shape() const { return map_shape_; }
  const Tensor<float>& inputs() const { return inputs_; }

 private:
  void read_header(detail::ByteReader& in) {
    std::array<char, 8> magic{};
    std::uint32_t fields[3] = {0, 0, 0};
    std::uint64_t count = 0;
    const std::size_t got = in.read(magic.data(), 8) + in.read(fields, sizeof fields) + in.read(&count, 8);
    check(got == detail::cache_fixed_header, in.name(), ": truncated at offset ", got, ": expected a ",
          detail::cache_fixed_header, "-byte tensor cache header");
    check(magic == detail::cache_magic, in.name(), ": offset 0: expected the magic PTRCACHE of a tensor cache, found '",
          std::string(magic.data(), magic.size()), "'");
    check(fields[0] == detail::cache_version, in.name(), ": offset 8: expected tensor cache version ",
          detail::cache_version, ", found ", fields[0]);
    check(fields[1] <= Shape::max_rank && fields[2] <= Shape::max_rank, in.name(),
          ": offset 12: expected input and target-map ranks up to ", Shape::max_rank, ", found ", fields[1], " and ",
          fields[2]);
    check(count < (std::uint64_t{1} << 48), in.name(), ": offset 20: expected an example count below 2^48, found ",
          count);
    count_ = static_cast<std::int64_t>(count);
    input_shape_ = read_extents(in, fields[1], "input");
    map_shape_ = read_extents(in, fields[2], "target map");
  }

  static Shape read_extents(detail::ByteReader& in, std::uint32_t rank, const char* what) {
    std::array<std::int64_t, Shape::max_rank> extents{};
    const std::uint64_t offset = in.offset();
    const std::size_t got = in.read(extents.data(), rank * sizeof(std::int64_t));
    check(got == rank * sizeof(std::int64_t), in.name(), ": truncated at offset ", in.offset(), ": expected the ", rank,
          " extents of the ", what, " shape");
    double numel = 1;
    for (std::uint32_t d = 0; d < rank; ++d) {
      check(extents[d] >= 1 && extents[d] <= (std::int64_t{1} << 32), in.name(), ": offset ", offset + 8 * d,
            ": expected a ", what, " extent in 1..2^32, found ", extents[d]);
      numel *= static_cast<double>(extents[d]);
    }
    check(numel <= 0x1p40, in.name(), ": offset ", offset, ": expected a ", what, " shape of at most 2^40 elements");
    return Shape(extents.begin(), extents.begin() + rank);
  }

  double record_bytes() const {
    return static_cast<double>(input_shape_.numel()) * sizeof(float) +
           static_cast<double>(map_shape_.rank() ? map_shape_.numel() : 1) * sizeof(std::int64_t);
  }

  std::int64_t count_ = 0;
  Shape input_shape_, map_shape_;
  Tensor<float> inputs_;
  std::vector<std::int64_t> targets_;
};

}  // namespace ptrain
