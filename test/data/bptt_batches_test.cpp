#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

#include <ptrain/data/bptt_batches.hpp>

#include "../common/files.hpp"

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(bptt_batches_test)

using Ids = std::vector<std::int64_t>;
using test::contains;
using test::error_of;

namespace {

Ids iota_ids(std::int64_t n) {
  Ids ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

}  // namespace

// The tutorial's batchify: 26 tokens, batch 4 -> 6 rows (2 tokens dropped); column j reads
// tokens 6j .. 6j + 5 down the rows.
BOOST_AUTO_TEST_CASE(batchify_lays_columns_side_by_side) {
  const Tensor<std::int64_t> source = batchify(iota_ids(26), 4);
  BOOST_TEST(source.shape() == (Shape{6, 4}));
  BOOST_TEST(source.to_vector() == (Ids{0, 6, 12, 18, 1, 7, 13, 19, 2, 8, 14, 20, 3, 9, 15, 21, 4, 10, 16, 22, 5, 11,
                                        17, 23}));
  BOOST_TEST(batchify(iota_ids(3), 4).shape() == (Shape{0, 4}));
}

// get_batch(source, i): rows i .. i + S - 1 as input, i + 1 .. i + S as target; the last window
// is shorter.
BOOST_AUTO_TEST_CASE(get_batch_as_the_tutorial) {
  const Tensor<std::int64_t> source = batchify(iota_ids(26), 4);
  const BpttBatch first = get_batch(source, 0, 4);
  BOOST_TEST(first.inputs.shape() == (Shape{4, 4}));
  BOOST_TEST(first.inputs.to_vector() == (std::vector<float>{0, 6, 12, 18, 1, 7, 13, 19, 2, 8, 14, 20, 3, 9, 15, 21}));
  BOOST_TEST(first.targets.to_vector() == (Ids{1, 7, 13, 19, 2, 8, 14, 20, 3, 9, 15, 21, 4, 10, 16, 22}));
  const BpttBatch last = get_batch(source, 4, 4);  // S = min(4, 6 - 1 - 4) = 1
  BOOST_TEST(last.inputs.shape() == (Shape{1, 4}));
  BOOST_TEST(last.inputs.to_vector() == (std::vector<float>{4, 10, 16, 22}));
  BOOST_TEST(last.targets.to_vector() == (Ids{5, 11, 17, 23}));
  BOOST_TEST(contains(error_of([&] { get_batch(source, 5, 4); }), "window at row 5 (bptt 4) of a source of 6 rows"));
}

BOOST_AUTO_TEST_CASE(a_batch_first_loader_gives_the_windows_transposed) {
  const Tensor<std::int64_t> source = batchify(iota_ids(26), 4);
  BpttLoader sequence_first(source, 2), batch_first(source, 2, BpttLoader::Layout::batch_first);
  auto a = sequence_first.begin();
  for (auto b = batch_first.begin(); b != batch_first.end(); ++a, ++b) {
    const BpttBatch s = *a, n = *b;
    const std::int64_t length = s.targets.size(0), columns = s.targets.size(1);
    BOOST_TEST(n.targets.shape() == (Shape{columns, length}));
    BOOST_TEST(n.inputs.shape() == (Shape{columns, length}));
    for (std::int64_t i = 0; i < length; ++i)
      for (std::int64_t j = 0; j < columns; ++j) {
        BOOST_TEST(n.targets[j * length + i] == s.targets[i * columns + j]);
        BOOST_TEST(n.inputs[j * length + i] == s.inputs[i * columns + j]);
      }
  }
}

BOOST_AUTO_TEST_CASE(loader_walks_the_windows_in_order) {
  BpttLoader loader(batchify(iota_ids(26), 4), 2);  // rows 0..5: windows at 0, 2, 4 (the last of 1 row)
  BOOST_TEST(loader.size() == 3u);
  BOOST_TEST(loader.tokens() == 20);
  std::vector<std::int64_t> lengths, firsts;
  for (const auto& batch : loader) {
    lengths.push_back(batch.targets.size(0));
    firsts.push_back(static_cast<std::int64_t>(batch.inputs[0]));
  }
  BOOST_TEST(lengths == (Ids{2, 2, 1}));
  BOOST_TEST(firsts == (Ids{0, 2, 4}));
  // A resumed epoch begins at the window it is given, once.
  loader.set_first_batch(2);
  std::int64_t windows = 0;
  for ([[maybe_unused]] const auto& batch : loader) ++windows;
  BOOST_TEST(windows == 1);
  windows = 0;
  for ([[maybe_unused]] const auto& batch : loader) ++windows;
  BOOST_TEST(windows == 3);
  BOOST_TEST(contains(error_of([] { BpttLoader(batchify(iota_ids(7), 4), 2); }), "at least 2 rows"));
}

// Rank r of R takes columns [r N / R, (r + 1) N / R); the shares side by side are the whole.
BOOST_AUTO_TEST_CASE(ranks_take_contiguous_columns) {
  const Tensor<std::int64_t> source = batchify(iota_ids(36), 6);  // 6 x 6
  const Tensor<std::int64_t> second = rank_columns(source, 1, 2);
  BOOST_TEST(second.shape() == (Shape{6, 3}));
  BOOST_TEST(second.slice(0, 2).to_vector() == (Ids{18, 24, 30, 19, 25, 31}));
  for (const int ranks : {1, 2, 3, 4, 6}) {
    std::int64_t next = 0;
    for (int r = 0; r < ranks; ++r) {
      const ColumnShare share = column_share(6, r, ranks);
      BOOST_TEST(share.begin == next);
      next = share.end;
      const Tensor<std::int64_t> mine = rank_columns(source, r, ranks);
      for (std::int64_t row = 0; row < 6; ++row)
        for (std::int64_t c = share.begin; c < share.end; ++c)
          BOOST_TEST(mine[row * (share.end - share.begin) + c - share.begin] == source[row * 6 + c]);
    }
    BOOST_TEST(next == 6);
  }
  BOOST_TEST(column_share(10, 0, 4).end == 2);  // uneven: 2, 3, 2, 3
  BOOST_TEST(column_share(10, 1, 4).end == 5);
  BOOST_TEST(contains(error_of([] { column_share(2, 0, 3); }), "2 columns for 3 data-parallel ranks"));
}

BOOST_AUTO_TEST_SUITE_END()
