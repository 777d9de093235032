#pragma once
// What tests that read and write files share: private temporary directories, whole-file byte
// I/O, and the message of the Error a call throws.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <ptrain/core/error.hpp>

namespace ptrain::test {

using Bytes = std::vector<unsigned char>;

// A directory `name`_<pid> under PTRAIN_TEST_DATA (or the system temp directory), made on first
// use and removed when the test program exits.
inline const std::filesystem::path& temp_dir(const std::string& name) {
  struct Dir {
    std::filesystem::path path;
    explicit Dir(const std::string& stem) {
      const char* env = std::getenv("PTRAIN_TEST_DATA");
      const std::filesystem::path base =
          env && *env ? std::filesystem::path(env) : std::filesystem::temp_directory_path();
      path = base / (stem + "_" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static std::map<std::string, Dir> dirs;
  return dirs.try_emplace(name, name).first->second.path;
}

// The test program's own directory.
inline const std::filesystem::path& test_dir() { return temp_dir("ptrain_test"); }

template <class Byte>
std::filesystem::path write_bytes(const std::filesystem::path& path, const std::vector<Byte>& bytes) {
  static_assert(sizeof(Byte) == 1);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
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

// The temporaries write_atomically left beside target (<target>.tmp.*): none after any write.
inline std::vector<std::filesystem::path> temporaries_beside(const std::filesystem::path& target) {
  std::vector<std::filesystem::path> found;
  const std::string prefix = target.filename().string() + ".tmp.";
  for (const auto& entry : std::filesystem::directory_iterator(target.parent_path()))
    if (entry.path().filename().string().starts_with(prefix)) found.push_back(entry.path());
  return found;
}

}  // namespace ptrain::test
