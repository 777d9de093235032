#pragma once
// Device checks: the caching allocator under real tensors, the pinned uploader, streams, and
// cuBLAS GEMM against the CPU GEMM in every scalar type.
#include "checks/common.cuh"

namespace ptrain::device_checks {

inline void check_allocator() {
  const auto before = Cuda::memory_stats();
  for (int step = 0; step < 4; ++step) {
    Tensor<float, Cuda> a(Shape{1000, 37}), b(Shape{3, 5}), c(Shape{1 << 20});
    a.fill(1.0f);
  }
  const auto after = Cuda::memory_stats();
  expect(after.raw_allocations - before.raw_allocations <= 3,
         "four identical steps call cudaMalloc at most once per block (" +
             std::to_string(after.raw_allocations - before.raw_allocations) + " calls)");
  expect(after.in_use_bytes == before.in_use_bytes, "freed tensors return their bytes to the cache");
}

inline void check_uploader() {
  cuda::Stream compute;
  cuda::CurrentStream on(compute.get());
  BatchUpload<Cuda> upload;
  for (int batch = 0; batch < 5; ++batch) {  // more batches than staging buffers
    const Tensor<float> host = signed_values<float>(Shape{8, 3, 17, 19}, 10 + batch);
    const Tensor<float, Cuda> device = upload(host);
    expect_close(device, host, 0, "pinned upload of batch " + std::to_string(batch) + " on a side stream");
  }
}

template <class T>
void check_gemm(const char* type, double tol) {
  for (const auto& [ta, tb] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    const std::int64_t m = 37, n = 53, k = 71;
    const Tensor<T> a = signed_values<T>(ta ? Shape{k, m} : Shape{m, k}, 3, -1, 1);
    const Tensor<T> b = signed_values<T>(tb ? Shape{n, k} : Shape{k, n}, 4, -1, 1);
    Tensor<T> c = signed_values<T>(Shape{m, n}, 5, -1, 1);
    auto ad = a.template to<Cuda>(), bd = b.template to<Cuda>();
    auto cd = c.template to<Cuda>();
    const std::int64_t lda = ta ? m : k, ldb = tb ? k : n;
    kernels::HostExecutor{}.gemm<T>(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
    kernels::CudaExecutor{}.gemm<T>(ta, tb, m, n, k, 0.5f, ad.data(), lda, bd.data(), ldb, 2.0f, cd.data(), n);
    expect_close(cd, c, tol, std::string("cuBLAS gemm ") + (ta ? "T" : "N") + (tb ? "T" : "N") + " (" + type + ")");
  }
}

inline void check_runtime() {
  check_allocator();
  check_uploader();
  check_gemm<float>("float", 1e-4);
  check_gemm<double>("double", 1e-12);
  check_gemm<half>("half", 0.1);
  check_gemm<bfloat16>("bfloat16", 0.5);
}

}  // namespace ptrain::device_checks
