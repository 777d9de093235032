#pragma once
// The safetensors format (Hugging Face; what torchvision/timm weights are shared in): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__"},
// then the tensors' bytes. F16, BF16, F32, F64 and I64 are read into and written from any T.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/io/atomic_file.hpp"
#include "ptrain/io/detail/json.hpp"
#include "ptrain/tensor/tensor.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian values; this reader copies them as they are");

// Listed in safetensors' own order, which its writer sorts by (largest first).
enum class Dtype { F16, BF16, F32, F64, I64 };

inline const char* dtype_name(Dtype d) {
  constexpr const char* names[] = {"F16", "BF16", "F32", "F64", "I64"};
  return names[static_cast<int>(d)];
}
inline std::ostream& operator<<(std::ostream& out, Dtype d) { return out << dtype_name(d); }
inline std::size_t dtype_size(Dtype d) {
  constexpr std::size_t sizes[] = {2, 2, 4, 8, 8};
  return sizes[static_cast<int>(d)];
}
inline std::optional<Dtype> parse_dtype(std::string_view name) {
  for (Dtype d : {Dtype::F16, Dtype::BF16, Dtype::F32, Dtype::F64, Dtype::I64})
    if (name == dtype_name(d)) return d;
  return std::nullopt;
}

// The dtype that holds T's values exactly: what a checkpoint stores them as.
template <class T>
constexpr Dtype dtype_of() {
  if constexpr (std::is_same_v<T, half>) return Dtype::F16;
  else if constexpr (std::is_same_v<T, bfloat16>) return Dtype::BF16;
  else if constexpr (std::is_same_v<T, float>) return Dtype::F32;
  else if constexpr (std::is_same_v<T, double>) return Dtype::F64;
  else {
    static_assert(std::is_same_v<T, std::int64_t>,
                  "dtype_of<T>: safetensors stores half, bfloat16, float, double or int64");
    return Dtype::I64;
  }
}

// One tensor of a file: its byte range [begin, end) counts from the end of the header.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
};

namespace detail {

// f(std::type_identity<S>{}) with S the C++ type a dtype is stored as.
template <class F>
decltype(auto) with_storage_type(Dtype d, F&& f) {
  switch (d) {
    case Dtype::F16: return f(std::type_identity<half>{});
    case Dtype::BF16: return f(std::type_identity<bfloat16>{});
    case Dtype::F32: return f(std::type_identity<float>{});
    case Dtype::F64: return f(std::type_identity<double>{});
    case Dtype::I64: return f(std::type_identity<std::int64_t>{});
  }
  fail("safetensors: invalid Dtype value ", static_cast<int>(d));
}

template <class To, class From>
To scalar_cast(From x) {
  // Through float for the 16-bit types, as Eigen and torch convert them.
  double v;
  if constexpr (is_reduced_float_v<From>)
    v = static_cast<double>(static_cast<float>(x));
  else
    v = static_cast<double>(x);
  if constexpr (std::is_integral_v<To>) {
    check(std::isfinite(v), "safetensors: cannot store ", v, " as an integer");
    return static_cast<To>(std::llround(v));
  } else if constexpr (is_reduced_float_v<To>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// dst[i] = src[i] in To's type; the bulk conversions of core/half.hpp where they apply.
template <class From, class To>
void cast_elements(const From* src, To* dst, std::size_t n) {
  if constexpr (std::is_same_v<From, To>) {
    if (n) std::memcpy(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(To));
  } else if constexpr ((std::is_same_v<From, float> && is_reduced_float_v<To>) ||
                       (is_reduced_float_v<From> && std::is_same_v<To, float>)) {
    convert(std::span<const From>(src, n), std::span<To>(dst, n));
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = scalar_cast<To>(src[i]);
  }
}

// An unsigned JSON integer (shapes and offsets), or an error naming the file and the tensor.
inline std::uint64_t header_integer(const JsonValue& v, const std::string& where, const char* field) {
  bool ok = v.kind == JsonValue::Kind::Number && !v.text.empty();
  std::uint64_t n = 0;
  for (char c : v.text) {
    ok = ok && c >= '0' && c <= '9' && n <= (UINT64_MAX - static_cast<std::uint64_t>(c - '0')) / 10;
    if (!ok) break;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  check(ok, where, ": ", field, " must hold non-negative integers below 2^64, found ",
        v.kind == JsonValue::Kind::Number ? v.text : std::string(v.kind_name()));
  return n;
}

inline const JsonValue& header_field(const JsonValue& tensor, const char* field, JsonValue::Kind kind,
                                     const std::string& where) {
  for (const auto& [key, value] : tensor.members)
    if (key == field) {
      check(value.kind == kind, where, ": \"", field, "\" must be ", JsonValue::kind_name(kind), ", found ",
            value.kind_name());
      return value;
    }
  fail(where, ": the header entry has no \"", field, "\"");
}

inline TensorInfo parse_tensor_info(const std::string& name, const JsonValue& entry, const std::string& file,
                                    std::uint64_t buffer_bytes) {
  const std::string where = file + ": tensor '" + name + "'";
  check(entry.kind == JsonValue::Kind::Object, where, ": expected an object {dtype, shape, data_offsets}, found ",
        entry.kind_name());
  TensorInfo info;
  info.name = name;
  const std::string& dtype = header_field(entry, "dtype", JsonValue::Kind::String, where).text;
  const auto parsed = parse_dtype(dtype);
  check(parsed.has_value(), where, ": unsupported dtype ", dtype, "; ptrain reads F16, BF16, F32, F64 and I64");
  info.dtype = *parsed;
  const auto& shape = header_field(entry, "shape", JsonValue::Kind::Array, where);
  check(shape.items.size() <= static_cast<std::size_t>(Shape::max_rank), where, ": rank ", shape.items.size(),
        " exceeds ptrain's maximum of ", Shape::max_rank);
  std::uint64_t bytes = dtype_size(info.dtype);
  for (const auto& extent : shape.items) {
    const std::uint64_t e = header_integer(extent, where, "shape");
    check(e <= static_cast<std::uint64_t>(INT64_MAX) && (e == 0 || bytes <= UINT64_MAX / e), where, ": shape ",
          "extent ", e, " is too large");
    bytes *= e;
    info.shape.push_back(static_cast<std::int64_t>(e));
  }
  const auto& offsets = header_field(entry, "data_offsets", JsonValue::Kind::Array, where);
  check(offsets.items.size() == 2, where, ": data_offsets must be [begin, end], found ", offsets.items.size(),
        " numbers");
  info.begin = header_integer(offsets.items[0], where, "data_offsets");
  info.end = header_integer(offsets.items[1], where, "data_offsets");
  check(info.begin <= info.end, where, ": data_offsets [", info.begin, ", ", info.end, "] end before they begin");
  check(info.end - info.begin == bytes, where, ": data_offsets [", info.begin, ", ", info.end, "] hold ",
        info.end - info.begin, " bytes, but ", dtype, " ", info.shape, " takes ", bytes);
  check(info.end <= buffer_bytes, where, ": data_offsets [", info.begin, ", ", info.end,
        "] are out of range: the data after the header is ", buffer_bytes, " bytes (is the file truncated?)");
  return info;
}

}  // namespace detail

// A safetensors file: the header is read and checked on construction (every tensor's dtype,
// shape and byte range); tensors are read on demand, converted to the T asked for.
class SafetensorsFile {
 public:
  // safetensors' own limit: a larger header is taken as a corrupt length.
  static constexpr std::uint64_t max_header_bytes = 100'000'000;

  explicit SafetensorsFile(std::filesystem::path path) : path_(std::move(path)) {
    const std::string file = path_.string();
    std::error_code ec;
    const std::uint64_t size = std::filesystem::file_size(path_, ec);
    check(!ec, file, ": cannot read the file (", ec.message(), ")");
    check(size >= 8, file, ": truncated: ", size, " bytes, but a safetensors file starts with an 8-byte header length");
    std::ifstream in = open();
    unsigned char length_bytes[8];
    read_bytes(in, 0, length_bytes, 8, "the header length");
    std::uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | length_bytes[i];
    check(header_bytes <= max_header_bytes, file, ": bad header: its length field says ", header_bytes,
          " bytes, more than safetensors' limit of ", max_header_bytes, " (not a safetensors file?)");
    check(header_bytes <= size - 8, file, ": truncated: the header is ", header_bytes, " bytes but only ", size - 8,
          " follow the length field");
    std::string header(header_bytes, '\0');
    read_bytes(in, 8, header.data(), header_bytes, "the header");
    data_start_ = 8 + header_bytes;
    parse_header(header, size - data_start_);
  }

  const std::filesystem::path& path() const { return path_; }
  // In the order of their bytes in the file.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  const TensorInfo* find(std::string_view name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  const TensorInfo& at(std::string_view name) const {
    const TensorInfo* t = find(name);
    check(t != nullptr, path_.string(), ": no tensor named '", name, "'");
    return *t;
  }

  template <class T>
  Tensor<T> read(const TensorInfo& info) const {
    std::ifstream in = open();
    return read<T>(in, info);
  }
  template <class T>
  Tensor<T> read(std::string_view name) const {
    return read<T>(at(name));
  }
  // Every tensor, in file order.
  template <class T>
  std::vector<std::pair<std::string, Tensor<T>>> read_all() const {
    std::ifstream in = open();
    std::vector<std::pair<std::string, Tensor<T>>> out;
    for (const auto& info : tensors_) out.emplace_back(info.name, read<T>(in, info));
    return out;
  }

 private:
  std::ifstream open() const {
    std::ifstream in(path_, std::ios::binary);
    check(in.good(), path_.string(), ": cannot open for reading");
    return in;
  }

  void read_bytes(std::ifstream& in, std::uint64_t offset, void* dst, std::uint64_t n, const std::string& what) const {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    check(in.good() && static_cast<std::uint64_t>(in.gcount()) == n, path_.string(), ": truncated while reading ",
          what, " (", n, " bytes at offset ", offset, ")");
  }

  template <class T>
  Tensor<T> read(std::ifstream& in, const TensorInfo& info) const {
    Tensor<T> out(info.shape);
    const auto n = static_cast<std::size_t>(info.shape.numel());
    const std::string what = "tensor '" + info.name + "'";
    detail::with_storage_type(info.dtype, [&]<class S>(std::type_identity<S>) {
      if constexpr (std::is_same_v<S, T>) {
        read_bytes(in, data_start_ + info.begin, out.data(), info.end - info.begin, what);
      } else {
        std::vector<S> stored(n);
        read_bytes(in, data_start_ + info.begin, stored.data(), info.end - info.begin, what);
        detail::cast_elements(stored.data(), out.data(), n);
      }
    });
    return out;
  }

  void parse_header(const std::string& header, std::uint64_t buffer_bytes) {
    const std::string file = path_.string();
    const auto root = io::detail::parse_json(header, file + ": header");
    check(root.kind == io::detail::JsonValue::Kind::Object, file, ": bad header: expected a JSON object, found ",
          root.kind_name());
    for (const auto& [name, entry] : root.members) {
      if (name == "__metadata__") {
        check(entry.kind == io::detail::JsonValue::Kind::Object, file, ": bad header: __metadata__ must be an object of strings");
        for (const auto& [key, value] : entry.members) {
          check(value.kind == io::detail::JsonValue::Kind::String, file, ": bad header: __metadata__ \"", key,
                "\" is ", value.kind_name(), ", expected a string");
          metadata_[key] = value.text;
        }
        continue;
      }
      tensors_.push_back(detail::parse_tensor_info(name, entry, file, buffer_bytes));
    }
    std::stable_sort(tensors_.begin(), tensors_.end(),
                     [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin; });
    const TensorInfo* furthest = nullptr;  // the non-empty tensor ending last so far
    for (const auto& cur : tensors_) {
      if (cur.begin == cur.end) continue;
      if (furthest && cur.begin < furthest->end)
        fail(file, ": bad header: the bytes of tensor '", cur.name, "' [", cur.begin, ", ", cur.end,
             ") overlap those of '", furthest->name, "' [", furthest->begin, ", ", furthest->end, ")");
      furthest = &cur;
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  }

  std::filesystem::path path_;
  std::uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// One tensor to save and the dtype to store it as.
template <class T>
struct SafetensorsEntry {
  std::string name;
  Tensor<T> tensor;
  Dtype dtype = Dtype::F32;
};

// Writes a safetensors file atomically. The layout is the one Python's safetensors writes
// (tensors sorted by dtype, largest first, then by name; header padded with spaces to 8 bytes),
// so the same tensors give the same bytes.
template <class T>
void save_safetensors(const std::filesystem::path& path, std::vector<SafetensorsEntry<T>> entries,
                      const std::map<std::string, std::string>& metadata = {}) {
  const std::string file = path.string();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    check(!e.name.empty() && e.name != "__metadata__", file, ": cannot save a tensor named '", e.name, "'");
    check(e.tensor.defined(), file, ": tensor '", e.name, "' is undefined");
    for (std::size_t j = 0; j < i; ++j)
      check(entries[j].name != e.name, file, ": two tensors are named '", e.name, "'");
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    if (a.dtype != b.dtype) return a.dtype > b.dtype;
    return a.name < b.name;
  });
  std::ostringstream json;
  const char* separator = "";
  json << '{';
  if (!metadata.empty()) {
    json << "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      json << separator << io::detail::json_quote(key) << ':' << io::detail::json_quote(value);
      separator = ",";
    }
    json << '}';
    separator = ",";
  }
  std::uint64_t offset = 0;
  for (const auto& e : entries) {
    const std::uint64_t end = offset + static_cast<std::uint64_t>(e.tensor.numel()) * dtype_size(e.dtype);
    json << separator << io::detail::json_quote(e.name) << ":{\"dtype\":\"" << dtype_name(e.dtype) << "\",\"shape\":[";
    for (int d = 0; d < e.tensor.rank(); ++d) json << (d ? "," : "") << e.tensor.size(d);
    json << "],\"data_offsets\":[" << offset << ',' << end << "]}";
    separator = ",";
    offset = end;
  }
  json << '}';
  std::string header = json.str();
  header.append((8 - header.size() % 8) % 8, ' ');

  write_atomically(path, [&](std::ostream& out) {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(length), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& e : entries) {
      const auto n = static_cast<std::size_t>(e.tensor.numel());
      detail::with_storage_type(e.dtype, [&]<class S>(std::type_identity<S>) {
        if constexpr (std::is_same_v<S, T>) {
          out.write(reinterpret_cast<const char*>(e.tensor.data()), static_cast<std::streamsize>(n * sizeof(S)));
        } else {
          std::vector<S> stored(n);
          detail::cast_elements(e.tensor.data(), stored.data(), n);
          out.write(reinterpret_cast<const char*>(stored.data()), static_cast<std::streamsize>(n * sizeof(S)));
        }
      });
    }
  });
}

// Every tensor of a file, in file order, converted to T.
template <class T>
std::vector<std::pair<std::string, Tensor<T>>> load_safetensors(const std::filesystem::path& path) {
  return SafetensorsFile(path).read_all<T>();
}

}  // namespace ptrain::io

PTRAIN_PREBUILT_STATE_FD(ptrain::io::save_safetensors)
PTRAIN_PREBUILT_STATE_FD(ptrain::io::load_safetensors)
