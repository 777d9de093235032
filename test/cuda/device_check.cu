// Runs the CUDA path against the CPU one: with no device (or no driver) it says so on stderr and
// exits 2, which the ctest wrapper reports as NOT RUN; with a device every check must pass.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ptrain/cuda.hpp>

using namespace ptrain;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

template <class T>
Tensor<T> signed_values(const Shape& shape, std::uint64_t seed) {
  Rng rng(seed);
  Tensor<T> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<T>(rng.uniform(-2.0, 2.0));
  return t;
}

// Index of the first element differing by more than tol, or -1.
template <class T>
std::int64_t first_mismatch(const std::vector<T>& got, const Tensor<T>& want, double tol) {
  if (static_cast<std::int64_t>(got.size()) != want.numel()) return 0;
  for (std::int64_t i = 0; i < want.numel(); ++i)
    if (!(std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])) <= tol)) return i;
  return -1;
}

template <class T>
void check_elementwise(const char* type, double tol) {
  // Odd size, several grid-stride rounds: 4096 blocks x 256 threads cover 1M elements.
  const Shape shape{3, 700001};
  const Tensor<T> x = signed_values<T>(shape, 1);
  const Tensor<T> g = signed_values<T>(shape, 2);
  const auto xd = x.template to<Cuda>();
  const auto gd = g.template to<Cuda>();
  const std::string t = std::string(" (") + type + ")";

  expect(first_mismatch(xd.to_vector(), x, 0) < 0, "host -> device -> host round trip" + t);
  const auto y = kernels::map(x, kernels::Relu{});
  const auto yd = kernels::map(xd, kernels::Relu{});
  expect(first_mismatch(yd.to_vector(), y, 0) < 0, "relu via kernels::map matches the CPU" + t);
  expect(first_mismatch(kernels::map2(yd, gd, kernels::ReluBackward{}).to_vector(),
                        kernels::map2(y, g, kernels::ReluBackward{}), 0) < 0,
         "relu backward via kernels::map2 matches the CPU" + t);
  expect(first_mismatch(kernels::map(xd, kernels::Sigmoid{}).to_vector(), kernels::map(x, kernels::Sigmoid{}), tol) < 0,
         "sigmoid via kernels::map matches the CPU within " + std::to_string(tol) + t);
  expect(first_mismatch(kernels::map2(xd, gd, kernels::Axpy<T>{T(0.5)}).to_vector(),
                        kernels::map2(x, g, kernels::Axpy<T>{T(0.5)}), tol) < 0,
         "axpy via kernels::map2 matches the CPU" + t);

  auto filled = Tensor<T, Cuda>::full(shape, T(3));
  expect(first_mismatch(filled.to_vector(), Tensor<T>::full(shape, T(3)), 0) < 0, "fill" + t);
  auto copy = xd.clone();
  expect(!copy.shares_storage_with(xd) && first_mismatch(copy.to_vector(), x, 0) < 0,
         "clone copies device to device" + t);
  const auto row = xd.slice(1, 2).template to<Cpu>();
  expect(first_mismatch(row.to_vector(), x.slice(1, 2), 0) < 0, "slice view offsets the device pointer" + t);
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
  try {
    check_elementwise<float>("float", 1e-6);
    check_elementwise<double>("double", 1e-14);
    bool threw = false;
    try {
      Tensor<float, Cuda> huge(Shape{std::int64_t(1) << 50});
    } catch (const Error& e) {
      threw = std::string(e.what()).find("cudaMalloc of") != std::string::npos;
      std::printf("      (expected) %s\n", e.what());
    }
    expect(threw, "an impossible allocation throws ptrain::Error naming cudaMalloc");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected error: %s\n", e.what());
    return 1;
  }
  if (failures) {
    std::fprintf(stderr, "%d CUDA check(s) failed\n", failures);
    return 1;
  }
  std::printf("all CUDA device checks passed\n");
  return 0;
}
