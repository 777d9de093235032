#pragma once
// Sequential reading of a plain or gzip-compressed file (recognised by its magic bytes 1f 8b, read
// through zlib), counting the offset in the decompressed stream for error messages.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <zlib.h>

#include "ptrain/core/error.hpp"

namespace ptrain::detail {

class ByteReader {
 public:
  explicit ByteReader(const std::filesystem::path& path) : name_(path.string()) {
    std::FILE* probe = std::fopen(name_.c_str(), "rb");
    check(probe != nullptr, name_, ": cannot open for reading: ", std::strerror(errno));
    unsigned char head[2] = {0, 0};
    const std::size_t got = std::fread(head, 1, 2, probe);
    gzip_ = got == 2 && head[0] == 0x1f && head[1] == 0x8b;
    if (gzip_) {
      std::fclose(probe);
      gz_ = gzopen(name_.c_str(), "rb");
      check(gz_ != nullptr, name_, ": cannot open as gzip");
      gzbuffer(gz_, 1u << 18);
    } else {
      std::rewind(probe);
      file_ = probe;
    }
  }
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;
  ~ByteReader() {
    if (gz_) gzclose(gz_);
    if (file_) std::fclose(file_);
  }

  // Reads up to n bytes; fewer only at the end of the stream.
  std::size_t read(void* dst, std::size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    std::size_t done = 0;
    while (done < n) {
      std::size_t got = 0;
      if (gzip_) {
        const auto want = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
        const int r = gzread(gz_, out + done, want);
        if (r < 0) {
          int code = 0;
          const char* message = gzerror(gz_, &code);
          fail(name_, ": offset ", offset_ + done, ": corrupt gzip stream: ", message);
        }
        got = static_cast<std::size_t>(r);
      } else {
        got = std::fread(out + done, 1, n - done, file_);
        check(!std::ferror(file_), name_, ": offset ", offset_ + done, ": read error");
      }
      if (got == 0) break;
      done += got;
    }
    offset_ += done;
    return done;
  }

  // Why a short read happened, for the truncation message.
  std::string end_reason() const {
    if (!gzip_) return "";
    int code = 0;
    gzerror(gz_, &code);
    return code == Z_BUF_ERROR ? " (the gzip stream ends early)" : "";
  }

  const std::string& name() const { return name_; }
  std::uint64_t offset() const { return offset_; }

 private:
  std::string name_;
  bool gzip_ = false;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  std::uint64_t offset_ = 0;
};

}  // namespace ptrain::detail
