#pragma once
// A reader of TensorBoard event files written apart from io/tensorboard.hpp, for the tests: the
// TFRecord framing (lengths and both masked CRC-32Cs checked) and a generic protocol buffer
// decoder that takes Event, Summary and Value apart by field number and wire type.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <ptrain/core/error.hpp>
#include <ptrain/io/detail/crc32c.hpp>

#include "files.hpp"

namespace ptrain::test {

struct ScalarEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string tag;
  float value = 0;
};

struct EventFile {
  std::string file_version;  // of the first record
  std::vector<ScalarEvent> scalars;
  std::size_t records = 0;
};

struct ProtoField {
  int number = 0, wire_type = 0;
  std::uint64_t varint = 0;  // wire type 0; also the raw bits of types 1 (fixed64) and 5 (fixed32)
  std::string_view bytes;    // wire type 2
};

inline std::vector<ProtoField> proto_fields(std::string_view data, const std::string& where) {
  std::vector<ProtoField> fields;
  std::size_t at = 0;
  const auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      check(at < data.size() && shift < 64, where, ": a varint runs past its message");
      const auto byte = static_cast<unsigned char>(data[at++]);
      v |= std::uint64_t(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return v;
    }
  };
  const auto fixed = [&](std::size_t n) {
    check(at + n <= data.size(), where, ": a fixed field runs past its message");
    std::uint64_t v = 0;
    std::memcpy(&v, data.data() + at, n);
    at += n;
    return v;
  };
  while (at < data.size()) {
    const std::uint64_t key = varint();
    ProtoField f{static_cast<int>(key >> 3), static_cast<int>(key & 7), 0, {}};
    if (f.wire_type == 0) f.varint = varint();
    else if (f.wire_type == 1) f.varint = fixed(8);
    else if (f.wire_type == 5) f.varint = fixed(4);
    else if (f.wire_type == 2) {
      const std::uint64_t n = varint();
      check(at + n <= data.size(), where, ": field ", f.number, " runs past its message");
      f.bytes = data.substr(at, n);
      at += n;
    } else {
      fail(where, ": field ", f.number, " has wire type ", f.wire_type, ", none an Event uses");
    }
    fields.push_back(f);
  }
  return fields;
}

inline std::uint32_t le32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline EventFile read_event_file(const std::filesystem::path& path) {
  const Bytes bytes = read_bytes(path);
  EventFile file;
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::string where = path.string() + ": record " + std::to_string(file.records);
    check(at + 12 <= bytes.size(), where, ": a header of ", bytes.size() - at, " bytes, expected 12");
    std::uint64_t length;
    std::memcpy(&length, bytes.data() + at, 8);
    check(le32(bytes.data() + at + 8) == io::detail::masked_crc32c(bytes.data() + at, 8), where,
          ": the length's CRC does not match");
    at += 12;
    check(at + length + 4 <= bytes.size(), where, ": ", length, " bytes of data and a CRC run past the file's end");
    const std::string_view data(reinterpret_cast<const char*>(bytes.data() + at), length);
    check(le32(bytes.data() + at + length) == io::detail::masked_crc32c(data.data(), data.size()), where,
          ": the data's CRC does not match");
    at += length + 4;
    ScalarEvent scalar;
    bool has_summary = false;
    for (const ProtoField& f : proto_fields(data, where)) {
      if (f.number == 1 && f.wire_type == 1) std::memcpy(&scalar.wall_time, &f.varint, 8);
      else if (f.number == 2 && f.wire_type == 0) scalar.step = static_cast<std::int64_t>(f.varint);
      else if (f.number == 3 && f.wire_type == 2) file.file_version = std::string(f.bytes);
      else if (f.number == 5 && f.wire_type == 2) {
        has_summary = true;
        for (const ProtoField& v : proto_fields(f.bytes, where + " summary")) {
          check(v.number == 1 && v.wire_type == 2, where, ": a Summary field other than value");
          for (const ProtoField& x : proto_fields(v.bytes, where + " value")) {
            if (x.number == 1 && x.wire_type == 2) scalar.tag = std::string(x.bytes);
            else if (x.number == 2 && x.wire_type == 5) std::memcpy(&scalar.value, &x.varint, 4);
            else fail(where, ": unexpected Value field ", x.number);
          }
        }
      } else {
        fail(where, ": unexpected Event field ", f.number, " of wire type ", f.wire_type);
      }
    }
    check(has_summary || file.records == 0, where, ": an Event with neither summary nor file version");
    if (has_summary) file.scalars.push_back(scalar);
    ++file.records;
  }
  return file;
}

// The one event file in a run directory.
inline std::filesystem::path event_file_in(const std::filesystem::path& run_directory) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(run_directory))
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) found.push_back(entry.path());
  check(found.size() == 1, run_directory.string(), ": ", found.size(), " event files, expected 1");
  return found.front();
}

}  // namespace ptrain::test
