// kernels/cpu/embedding.hpp (whole rows, split over the threads) against the indexed gather of
// kernels/indexed/embedding.hpp under the HostExecutor: the same sums in the same order, so the
// same bits, in float and half, on a table large enough to run on every thread.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/kernels/embedding.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/tensor/tensor.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(embedding_kernels_test)

namespace {

template <class T>
void check_backward_matches_the_gather() {
  // 3000 rows of 48: rows 0 and 2999, 7, and every 13th looked up, some several times
  const std::int64_t rows = 3000, dim = 48;
  std::vector<std::int64_t> row_of_position;
  for (std::int64_t r = 0; r < rows; r += 13) row_of_position.push_back(r);
  for (std::int64_t r : {7, 0, 2999, 7, 13, 7}) row_of_position.push_back(r);
  const auto positions = static_cast<std::int64_t>(row_of_position.size());
  std::vector<std::int64_t> first(static_cast<std::size_t>(rows + 1), 0), listed;  // a counting sort, as the op's
  for (std::int64_t r : row_of_position) ++first[static_cast<std::size_t>(r + 1)];
  for (std::int64_t r = 0; r < rows; ++r) first[static_cast<std::size_t>(r + 1)] += first[static_cast<std::size_t>(r)];
  std::vector<std::int64_t> fill(first.begin(), first.end() - 1);
  listed.resize(row_of_position.size());
  for (std::int64_t p = 0; p < positions; ++p)
    listed[static_cast<std::size_t>(fill[static_cast<std::size_t>(row_of_position[static_cast<std::size_t>(p)])]++)] = p;
  const Tensor<T> g = tensor_cast<T>(random_tensor({positions, dim}, 1));
  Tensor<T> tuned({rows, dim}), gathered({rows, dim});
  kernels::embedding_backward(kernels::CpuExecutor{}, g.data(), first.data(), listed.data(), rows, dim, tuned.data());
  kernels::embedding_backward(kernels::HostExecutor{}, g.data(), first.data(), listed.data(), rows, dim,
                              gathered.data());
  BOOST_TEST(std::memcmp(tuned.data(), gathered.data(), sizeof(T) * static_cast<std::size_t>(rows * dim)) == 0);
  BOOST_TEST(static_cast<double>(tuned[1 * dim]) == 0.0);  // row 1: never looked up
  // row 7, three times: positions in order
  const std::int64_t p7 = positions - 6;
  const double want = static_cast<double>(static_cast<accumulate_t<T>>(g[p7 * dim]) +
                                          static_cast<accumulate_t<T>>(g[(p7 + 3) * dim]) +
                                          static_cast<accumulate_t<T>>(g[(p7 + 5) * dim]));
  BOOST_TEST(static_cast<double>(tuned[7 * dim]) == static_cast<double>(static_cast<T>(want)));
}

}  // namespace

BOOST_AUTO_TEST_CASE(cpu_backward_is_the_indexed_gather_bit_for_bit) {
  check_backward_matches_the_gather<float>();
  check_backward_matches_the_gather<half>();
}

BOOST_AUTO_TEST_SUITE_END()
