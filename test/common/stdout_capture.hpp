#pragma once
// StdoutCapture: what the code run while it lives writes to stdout (file descriptor 1), for the
// tests of printed lines.
#include <cstdio>
#include <string>

#include <unistd.h>

namespace ptrain::test {

// What the code in between writes to stdout (file descriptor 1).
class StdoutCapture {
 public:
  StdoutCapture() : file_(std::tmpfile()) {
    std::fflush(stdout);
    saved_ = ::dup(::fileno(stdout));
    ::dup2(::fileno(file_), ::fileno(stdout));
  }
  StdoutCapture(const StdoutCapture&) = delete;
  StdoutCapture& operator=(const StdoutCapture&) = delete;
  ~StdoutCapture() { finish(); }
  std::string finish() {
    if (!file_) return text_;
    std::fflush(stdout);
    ::dup2(saved_, ::fileno(stdout));
    ::close(saved_);
    std::rewind(file_);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file_)) > 0;) text_.append(buffer, n);
    std::fclose(file_);
    file_ = nullptr;
    return text_;
  }

 private:
  std::FILE* file_;
  int saved_ = -1;
  std::string text_;
};

}  // namespace ptrain::test
