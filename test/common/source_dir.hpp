#pragma once
// The test sources' folder (test/), as CMake configured it: test/main.cpp is the one translation
// unit compiled with it, so the others' objects hold no absolute path and a compiler cache (with
// base_dir, scripts/env.sh) serves them to a checkout in another folder. Files the tests read from
// the source tree (test/nn/data, test/train/data) are found from here, whatever the working folder.
#include <filesystem>

namespace ptrain::test {

const char* test_source_dir();  // test/main.cpp

inline std::filesystem::path test_source(const std::filesystem::path& relative) {
  return std::filesystem::path(test_source_dir()) / relative;
}

}  // namespace ptrain::test
