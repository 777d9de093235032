// The Executor concept (kernels/executor.hpp): an archetype with exactly the documented members
// satisfies it, both host executors do, and a type missing a member does not.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include <ptrain/kernels/executor.hpp>
#include <ptrain/tensor/tensor.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(executor_concept_test)

namespace {

// The documented members and nothing else: serial loops, the reference GEMM.
struct ExecutorArchetype {
  using device = Cpu;
  template <kernels::IndexedKernel F>
  void indexed(std::int64_t n, const F& f) const {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
  template <kernels::RowReduction F>
  void row_reduction(std::int64_t rows, std::int64_t length, const F& f) const {
    for (std::int64_t row = 0; row < rows; ++row) {
      auto total = f.identity();
      for (std::int64_t j = 0; j < length; ++j) total = f.combine(total, f.term(row, j));
      f.finish(row, total);
    }
  }
  template <class T>
  void gemm(bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
            const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) const {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        T sum = 0;
        for (std::int64_t p = 0; p < k; ++p) sum += a[i * lda + p] * b[p * ldb + j];
        c[i * ldc + j] = alpha * sum + beta * c[i * ldc + j];
      }
  }
  template <class T>
  Tensor<T, Cpu> buffer(std::int64_t n) const {
    return Tensor<T, Cpu>(Shape{n});
  }
};

// No GEMM: the layers that multiply matrices could not run on it.
struct WithoutGemm {
  using device = Cpu;
  template <class F>
  void indexed(std::int64_t, const F&) const {}
  template <class F>
  void row_reduction(std::int64_t, std::int64_t, const F&) const {}
  template <class T>
  Tensor<T, Cpu> buffer(std::int64_t n) const {
    return Tensor<T, Cpu>(Shape{n});
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_archetype_and_the_host_executors_satisfy_it) {
  static_assert(kernels::Executor<ExecutorArchetype>);
  static_assert(kernels::Executor<kernels::CpuExecutor>);
  static_assert(kernels::Executor<kernels::HostExecutor>);
  // The archetype runs a kernel as the library's executors do.
  const ExecutorArchetype ex;
  std::vector<float> out(4);
  ex.indexed(4, [&](std::int64_t i) { out[static_cast<std::size_t>(i)] = static_cast<float>(i * i); });
  BOOST_TEST(out == (std::vector<float>{0, 1, 4, 9}), boost::test_tools::per_element());
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4] = {};
  ex.gemm<float>(false, false, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  BOOST_TEST(c[0] == 19.0f);
  BOOST_TEST(c[3] == 50.0f);
}

BOOST_AUTO_TEST_CASE(what_is_not_an_executor) {
  static_assert(!kernels::Executor<WithoutGemm>);
  static_assert(!kernels::Executor<int>);
}

BOOST_AUTO_TEST_SUITE_END()
