#pragma once
// A std::streambuf over a POSIX file descriptor, so that writers keep taking a std::ostream while
// write_atomically keeps the descriptor it must fsync (std::ofstream hides it).
#include <cerrno>
#include <streambuf>
#include <vector>

#include <unistd.h>

namespace ptrain::io::detail {

class FileDescriptorBuffer : public std::streambuf {
 public:
  explicit FileDescriptorBuffer(int fd) : fd_(fd), buffer_(std::size_t{1} << 16) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  // errno of the first write that failed (ENOSPC, EIO, ...), 0 while none has.
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* data = pbase();
    std::size_t left = static_cast<std::size_t>(pptr() - pbase());
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    while (left > 0 && error_ == 0) {
      const ssize_t written = ::write(fd_, data, left);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        error_ = written < 0 ? errno : EIO;
        break;
      }
      data += written;
      left -= static_cast<std::size_t>(written);
    }
    return error_ == 0;
  }

  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
};

}  // namespace ptrain::io::detail
