// Replays fuzz inputs without libFuzzer: every file of the directories (or files) named on the
// command line goes through the target's LLVMFuzzerTestOneInput. An exception other than
// ptrain::Error, a crash, a sanitizer report, or the process's peak memory passing 1 GiB (the
// cost of a corrupt size trusted) fails the run, naming the input.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <sys/resource.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);  // optional, as in libFuzzer

namespace {
constexpr long max_resident_mib = 1024;

long peak_resident_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}
}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> inputs;
  for (int a = 1; a < argc; ++a) {
    const std::filesystem::path arg = argv[a];
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else if (std::filesystem::exists(arg)) {
      inputs.push_back(arg);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", input.c_str(), bytes.size());
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAILED: %s: escaped with %s\n", input.c_str(), e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "FAILED: %s: escaped with an exception not derived from std::exception\n", input.c_str());
      return 1;
    }
    if (peak_resident_mib() > max_resident_mib) {
      std::fprintf(stderr, "FAILED: %s: the process held %ld MiB, more than %ld\n", input.c_str(), peak_resident_mib(),
                   max_resident_mib);
      return 1;
    }
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  return inputs.empty() ? 1 : 0;
}
