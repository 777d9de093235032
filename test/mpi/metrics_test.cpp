// Metrics under mpiexec -n 2 and -n 3: each rank counts its own shard (one rank none at all),
// and the reduced counts equal the counts of the whole data in one process.
#include <cstdint>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/train/metrics.hpp>

#include "mpi_test_main.hpp"

using namespace ptrain;

namespace {

// The whole data set, the same on every rank: n items of scores [C, pixels...] and targets.
struct Data {
  Tensor<float> scores;
  std::vector<std::int64_t> targets;
  std::int64_t per_item;  // targets per item
};

Data make_data(const Shape& shape, std::int64_t ignore, std::uint64_t seed) {
  Rng rng(seed);
  Data d{Tensor<float>(shape), {}, shape.numel() / shape[0] / shape[1]};
  for (std::int64_t i = 0; i < d.scores.numel(); ++i) d.scores[i] = static_cast<float>(rng.below(4));  // ties
  for (std::int64_t i = 0; i < shape[0] * d.per_item; ++i)
    d.targets.push_back(rng.bernoulli(0.1) ? ignore : static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(shape[1]))));
  return d;
}

// The items whose index i has owner(i) == rank.
template <class Owner>
Data shard(const Data& all, int rank, Owner owner) {
  std::vector<std::int64_t> items;
  for (std::int64_t i = 0; i < all.scores.size(0); ++i)
    if (owner(i) == rank) items.push_back(i);
  Shape shape = all.scores.shape();
  shape[0] = static_cast<std::int64_t>(items.size());
  Data part{Tensor<float>(shape), {}, all.per_item};
  const std::int64_t item = all.scores.numel() / all.scores.size(0);
  for (std::size_t k = 0; k < items.size(); ++k) {
    part.scores.slice(static_cast<std::int64_t>(k), static_cast<std::int64_t>(k) + 1)
        .copy_from(all.scores.slice(items[k], items[k] + 1));
    const auto first = all.targets.begin() + items[k] * all.per_item;
    part.targets.insert(part.targets.end(), first, first + all.per_item);
  }
  return part;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metrics_test)

BOOST_AUTO_TEST_CASE(top_k_reduced_over_ranks_equals_the_whole_data) {
  MpiComm world(test::session());
  const Data all = make_data({37, 7}, 0, 1);  // classification: no ignored label
  TopKAccuracy whole({1, 5});
  whole.update(all.scores, all.targets);
  const Data mine = shard(all, world.rank(), [&](std::int64_t i) { return static_cast<int>(i % world.size()); });
  TopKAccuracy local({1, 5});
  local.update(mine.scores, mine.targets);
  const auto reduced = local.reduced(world);
  BOOST_TEST(reduced.samples() == 37);
  BOOST_TEST(reduced.correct(1) == whole.correct(1));
  BOOST_TEST(reduced.correct(5) == whole.correct(5));
  BOOST_TEST(whole.correct(1) < whole.correct(5));
  BOOST_TEST(local.samples() == static_cast<std::int64_t>(mine.targets.size()));  // the local counts stay
}

BOOST_AUTO_TEST_CASE(confusion_matrix_reduced_over_ranks_equals_the_whole_data) {
  MpiComm world(test::session());
  const Data all = make_data({11, 5, 3, 4}, 255, 2);  // segmentation: 11 images of 3x4 pixels
  ConfusionMatrix whole(5, 255);
  whole.update(all.scores, all.targets);
  // The last rank holds no image.
  const int holders = world.size() - 1;
  const Data mine = shard(all, world.rank(), [&](std::int64_t i) { return static_cast<int>(i % holders); });
  ConfusionMatrix local(5, 255);
  if (world.rank() < holders) local.update(mine.scores, mine.targets);
  const auto reduced = local.reduced(world);
  BOOST_TEST(reduced.counts() == whole.counts(), boost::test_tools::per_element());
  BOOST_TEST(reduced.total() > 0);
  BOOST_TEST(reduced.total() < 11 * 12);  // some pixels were void
  const auto iou = reduced.iou(), whole_iou = whole.iou();
  for (std::size_t c = 0; c < iou.size(); ++c) BOOST_TEST(iou[c] == whole_iou[c]);
  BOOST_TEST(reduced.mean_iou() == whole.mean_iou());
  BOOST_TEST(reduced.mean_dice() == whole.mean_dice());
}

BOOST_AUTO_TEST_SUITE_END()
