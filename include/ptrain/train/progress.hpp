#pragma once
// A progress bar redrawn in place on a terminal; nothing at all when stdout is a file or pipe,
// where the trainer's per-epoch lines are the record.
#include <cstdio>
#include <string>

#include "ptrain/core/log.hpp"

namespace ptrain {

class ProgressBar {
 public:
  ProgressBar(std::string label, std::int64_t total, bool enabled)
      : label_(std::move(label)), total_(total), enabled_(enabled && total > 0) {}

  void update(std::int64_t done, double loss) {
    if (!enabled_) return;
    constexpr int width = 30;
    const int filled = static_cast<int>(width * done / total_);
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < width) bar += '>' + std::string(static_cast<std::size_t>(width - filled - 1), ' ');
    std::fprintf(stdout, "\r%s [%s] %lld/%lld loss %.4f", label_.c_str(), bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), loss);
    std::fflush(stdout);
  }
  void finish() {
    if (!enabled_) return;
    std::fputs("\r\033[K", stdout);
    std::fflush(stdout);
  }

 private:
  std::string label_;
  std::int64_t total_;
  bool enabled_;
};

}  // namespace ptrain
