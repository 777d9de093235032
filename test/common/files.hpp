#pragma once
// What tests that read and write files share: a temporary directory of the test program's own,
// whole-file byte I/O, and the message of an expected error.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <ptrain/core/error.hpp>

namespace ptrain::test {

using Bytes = std::vector<unsigned char>;

// A directory of this process's own under PTRAIN_TEST_DATA (or the system temp directory),
// removed when the test program exits.
inline const std::filesystem::path& test_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      const char* env = std::getenv("PTRAIN_TEST_DATA");
      const std::filesystem::path base = env && *env ? std::filesystem::path(env) : std::filesystem::temp_directory_path();
      path = base / ("ptrain_test_" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

inline std::filesystem::path write_bytes(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE(out.good());
  return path;
}

inline Bytes read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE(in.good());
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The message of the Error that f throws; fails the test if it throws nothing.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  BOOST_FAIL("expected a ptrain::Error");
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace ptrain::test
