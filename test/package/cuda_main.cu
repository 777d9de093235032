// The installed ptrain::cuda target compiles a .cu file that includes the CUDA umbrella. With no
// device this exits 2 with "no CUDA device found", as test/cuda/device_check does.
#include <cstdio>
#include <vector>

#include <ptrain/cuda.hpp>

int main() {
  try {
    ptrain::require_cuda_device();
  } catch (const ptrain::NoCudaDevice& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  auto x = ptrain::Tensor<float>::from({4}, {-1, 2, -3, 4}).to<ptrain::Cuda>();
  const auto y = ptrain::kernels::map(x, ptrain::kernels::Relu{}).to_vector();
  const bool ok = y == std::vector<float>{0, 2, 0, 4};
  std::printf("package consumer (CUDA): relu on the GPU %s\n", ok ? "as expected" : "WRONG");
  return ok ? 0 : 1;
}
