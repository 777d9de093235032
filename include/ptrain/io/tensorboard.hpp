#pragma once
// TensorBoard event files, as torch.utils.tensorboard.SummaryWriter writes them: a run directory
// holds events.out.tfevents.<time>.<host>.<pid>, a TFRecord stream (each record: its length as a
// little-endian uint64, the masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the
// data) of Event protocol buffers, the first one naming the file version, the rest each one scalar
// Summary. The protocol buffers are written by hand (tensorflow/core/util/event.proto,
// framework/summary.proto): Event{wall_time = 1 double, step = 2 int64, file_version = 3 string,
// summary = 5 Summary}, Summary{value = 1 repeated Value}, Value{tag = 1 string, simple_value = 2 float}.
//
// The one file ptrain writes that is not written through write_atomically (io/atomic_file.hpp):
// an event log is a stream a TensorBoard reads while the run appends to it, and rewriting it
// whole per record would cost the square of its length. Records are flushed by flush() (the
// Trainer's, once per epoch) and when 10 s have passed since the last flush; a run that dies
// mid-record leaves a last record whose length or CRC does not check, where TensorBoard's reader
// stops, as it does for a file still being written.
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/io/detail/crc32c.hpp"

namespace ptrain::io {

namespace detail {

// Protocol buffer wire format: keys are (field << 3) | wire type.
class ProtoWriter {
 public:
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<char>(v));
  }
  void key(int field, int wire_type) { varint(static_cast<std::uint64_t>(field) << 3 | static_cast<unsigned>(wire_type)); }
  void int64_field(int field, std::int64_t v) {
    key(field, 0);
    varint(static_cast<std::uint64_t>(v));  // negative: ten bytes of two's complement, as protobuf's int64
  }
  void double_field(int field, double v) {
    key(field, 1);
    little_endian(v);
  }
  void float_field(int field, float v) {
    key(field, 5);
    little_endian(v);
  }
  void bytes_field(int field, std::string_view v) {
    key(field, 2);
    varint(v.size());
    bytes_.append(v);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  template <class V>
  void little_endian(V v) {
    static_assert(std::endian::native == std::endian::little, "io/tensorboard.hpp writes little-endian hosts only");
    char raw[sizeof(V)];
    std::memcpy(raw, &v, sizeof(V));
    bytes_.append(raw, sizeof(V));
  }
  std::string bytes_;
};

// One TFRecord around data.
inline std::string tfrecord(std::string_view data) {
  std::string record(12, '\0');
  const std::uint64_t length = data.size();
  std::memcpy(record.data(), &length, 8);
  const std::uint32_t length_crc = masked_crc32c(record.data(), 8);
  std::memcpy(record.data() + 8, &length_crc, 4);
  record.append(data);
  const std::uint32_t data_crc = masked_crc32c(data.data(), data.size());
  record.append(reinterpret_cast<const char*>(&data_crc), 4);
  return record;
}

inline double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace detail

// SummaryWriter's add_scalar into one run directory (created if missing).
class EventWriter {
 public:
  explicit EventWriter(const std::filesystem::path& run_directory);

  void add_scalar(std::string_view tag, double value, std::int64_t step);

  // Hands what was added to the file system, where a reader sees it.
  void flush() {
    out_.flush();
    check(out_.good(), path_.string(), ": writing the TensorBoard event file failed");
    last_flush_ = Clock::now();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  using Clock = std::chrono::steady_clock;
  void write(std::string_view data);

  std::filesystem::path path_;
  std::ofstream out_;
  Clock::time_point last_flush_ = Clock::now();
};

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE EventWriter::EventWriter(const std::filesystem::path& run_directory) {
  std::error_code error;
  std::filesystem::create_directories(run_directory, error);
  check(!error, run_directory.string(), ": cannot create the TensorBoard run directory: ", error.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double now = detail::seconds_since_epoch();
  path_ = run_directory / ("events.out.tfevents." + std::to_string(static_cast<std::int64_t>(now)) + "." + host +
                           "." + std::to_string(::getpid()));
  out_.open(path_, std::ios::binary | std::ios::app);
  check(out_.is_open(), path_.string(), ": cannot open the TensorBoard event file for writing");
  detail::ProtoWriter event;
  event.double_field(1, now);
  event.int64_field(2, 0);
  event.bytes_field(3, "brain.Event:2");
  write(event.bytes());
  flush();
}

PTRAIN_PREBUILT_INLINE void EventWriter::add_scalar(std::string_view tag, double value, std::int64_t step) {
  detail::ProtoWriter summary_value;
  summary_value.bytes_field(1, tag);
  summary_value.float_field(2, static_cast<float>(value));
  detail::ProtoWriter summary;
  summary.bytes_field(1, summary_value.bytes());
  detail::ProtoWriter event;
  event.double_field(1, detail::seconds_since_epoch());
  event.int64_field(2, step);
  event.bytes_field(5, summary.bytes());
  write(event.bytes());
  if (Clock::now() - last_flush_ > std::chrono::seconds(10)) flush();
}

PTRAIN_PREBUILT_INLINE void EventWriter::write(std::string_view data) {
  out_ << detail::tfrecord(data);
  check(out_.good(), path_.string(), ": writing the TensorBoard event file failed");
}
#endif

}  // namespace ptrain::io
