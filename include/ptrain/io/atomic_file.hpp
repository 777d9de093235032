#pragma once
// Nothing is half-written: files are written under a temporary name beside the target and
// renamed over it, which POSIX makes atomic within one file system.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "ptrain/core/error.hpp"

namespace ptrain::io {

template <class Write>
void write_atomically(const std::filesystem::path& path, Write&& write) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    check(out.good(), path.string(), ": cannot open ", tmp.string(), " for writing");
    try {
      write(out);
    } catch (...) {
      out.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw;
    }
    out.flush();
    if (!out.good()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      fail(path.string(), ": writing failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail(path.string(), ": cannot rename the temporary file into place");
  }
}

}  // namespace ptrain::io
