// Runs the CUDA path against the CPU one: with no device (or no driver) it says so on stderr and
// exits 2, which the ctest wrapper reports as NOT RUN; with a device every check must pass.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "checks/common.cuh"
#include "checks/elementwise.cuh"
#include "checks/runtime.cuh"
#include "checks/pointwise.cuh"
#include "checks/reductions.cuh"
#include "checks/spatial.cuh"
#include "checks/autograd.cuh"
#include "checks/autograd_spatial.cuh"
#include "checks/data_parallel.cuh"
#include "checks/mixed_precision.cuh"
#include "checks/autograd_more.cuh"
#include "checks/transformer.cuh"

using namespace ptrain;
using namespace ptrain::device_checks;

namespace {
void check_impossible_allocation() {
  bool threw = false;
  try {
    Tensor<float, Cuda> huge(Shape{std::int64_t(1) << 50});
  } catch (const Error& e) {
    threw = std::string(e.what()).find("out of device memory allocating " + std::to_string(std::int64_t(1) << 52)) !=
            std::string::npos;
    std::printf("      (expected) %s\n", e.what());
  }
  expect(threw, "an impossible allocation throws ptrain::Error saying how many bytes it asked for");
}
}  // namespace

int main() {
  int devices = 0;
  try {
    devices = require_cuda_device();
  } catch (const NoCudaDevice& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties(0)");
  std::printf("%d CUDA device(s); device 0: %s, compute capability %d.%d\n", devices, prop.name, prop.major,
              prop.minor);
  expect(cuda_device_count() == devices, "cuda_device_count agrees with require_cuda_device");
  // Each family on its own: an exception ends that family's checks, counted as a failure, and the
  // rest still run, so that one run on a lent GPU shows every failure.
  const std::pair<const char*, void (*)()> families[] = {
      {"elementwise", check_elementwise},
      {"runtime", check_runtime},
      {"pointwise", check_pointwise},
      {"reductions", check_reductions},
      {"spatial", check_spatial},
      {"autograd", check_autograd},
      {"autograd_spatial", check_autograd_spatial},
      {"data_parallel", check_data_parallel},
      {"mixed_precision", check_mixed_precision},
      {"autograd_more", check_autograd_more},
      {"transformer", check_transformer},
      {"allocation", check_impossible_allocation},
  };
  for (const auto& [family, run] : families) {
    try {
      run();
    } catch (const std::exception& e) {
      expect(false, std::string("the ") + family + " checks stopped at an unexpected error: " + e.what());
    }
  }
  if (failures()) {
    std::fprintf(stderr, "%d CUDA check(s) failed\n", failures());
    return 1;
  }
  std::printf("all CUDA device checks passed\n");
  return 0;
}
