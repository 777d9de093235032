#pragma once
// What every fuzz target shares: the input written to a file in a per-process scratch directory
// (the parsers read paths), and the rule that a clean refusal is a ptrain::Error. Any other
// exception leaves LLVMFuzzerTestOneInput, which libFuzzer reports as a crash and the replay
// driver as a failure.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

#include <unistd.h>

#include "ptrain/core/error.hpp"

namespace ptrain::fuzz {

// Removed when the process exits normally; one per process, so parallel fuzzers do not collide.
class ScratchDirectory {
 public:
  ScratchDirectory()
      : path_(std::filesystem::temp_directory_path() / ("ptrain_fuzz_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline const std::filesystem::path& scratch() {
  static const ScratchDirectory directory;
  return directory.path();
}

inline void write_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  check(out.good(), "fuzz: cannot write ", path.string());
}

// The input as the file `name` of the scratch directory.
inline std::filesystem::path input_file(const std::uint8_t* data, std::size_t size, const std::string& name) {
  const auto path = scratch() / name;
  write_file(path, {data, size});
  return path;
}

// Runs the parser; a ptrain::Error is the expected way to refuse bad input.
template <class Parse>
int refuse_cleanly(Parse&& parse) {
  try {
    parse();
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace ptrain::fuzz
