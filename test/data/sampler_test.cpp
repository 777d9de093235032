#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include <ptrain/data/sampler.hpp>

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(sampler_test)

using Indices = std::vector<std::int64_t>;

namespace {
bool is_permutation_of_range(Indices v, std::int64_t n) {
  std::sort(v.begin(), v.end());
  Indices range(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) range[static_cast<std::size_t>(i)] = i;
  return v == range;
}
}  // namespace

BOOST_AUTO_TEST_CASE(sequential_is_the_identity_every_epoch) {
  const SequentialSampler s(5);
  BOOST_TEST(s.size() == 5);
  BOOST_TEST(s.indices(0) == (Indices{0, 1, 2, 3, 4}));
  BOOST_TEST(s.indices(7) == (Indices{0, 1, 2, 3, 4}));
  static_assert(Sampler<SequentialSampler> && Sampler<RandomSampler> && Sampler<DistributedSampler>);
}

BOOST_AUTO_TEST_CASE(random_is_a_permutation_fixed_by_seed_and_epoch) {
  const RandomSampler a(1000, 42), b(1000, 42), c(1000, 43);
  const Indices e0 = a.indices(0), e1 = a.indices(1);
  BOOST_TEST(is_permutation_of_range(e0, 1000));
  BOOST_TEST(is_permutation_of_range(e1, 1000));
  BOOST_TEST(e0 != e1);
  BOOST_TEST(e0 == b.indices(0));
  BOOST_TEST(e1 == b.indices(1));
  BOOST_TEST(a.indices(1) == e1);  // asking again, or out of order, gives the same epoch
  BOOST_TEST(c.indices(0) != e0);
  BOOST_TEST(!std::is_sorted(e0.begin(), e0.end()));
}

BOOST_AUTO_TEST_CASE(random_permutation_is_the_same_on_every_platform) {
  // Drawn from mt19937_64 (whose output the standard fixes) by rejection sampling, not through
  // std::uniform_int_distribution (which each library implements its own way). A change here
  // changes the data order of every past run.
  BOOST_TEST(RandomSampler(10, 0).indices(0) == (Indices{6, 2, 1, 4, 8, 0, 9, 5, 3, 7}));
  BOOST_TEST(RandomSampler(10, 0).indices(1) == (Indices{7, 2, 5, 1, 9, 3, 0, 8, 4, 6}));
  BOOST_TEST(RandomSampler(10, 12345).indices(7) == (Indices{1, 7, 9, 0, 5, 4, 2, 6, 3, 8}));
}

BOOST_AUTO_TEST_CASE(positions_are_uniform) {
  // Over many epochs each index lands in each position about equally often.
  const std::int64_t n = 5, epochs = 20000;
  std::vector<std::vector<int>> counts(n, std::vector<int>(n, 0));
  const RandomSampler s(n, 7);
  for (std::int64_t e = 0; e < epochs; ++e) {
    const Indices order = s.indices(e);
    for (std::int64_t p = 0; p < n; ++p)
      ++counts[static_cast<std::size_t>(p)][static_cast<std::size_t>(order[static_cast<std::size_t>(p)])];
  }
  for (const auto& row : counts)
    for (int c : row) BOOST_TEST(std::abs(c - epochs / n) < 300);  // 4000 expected, sd ~57
}

BOOST_AUTO_TEST_CASE(empty_and_single_element) {
  BOOST_TEST(RandomSampler(0, 1).indices(3).empty());
  BOOST_TEST(RandomSampler(1, 1).indices(3) == Indices{0});
  BOOST_TEST(DistributedSampler(0, 2, 1).indices(0).empty());
}

// The expected shards below are what torch.utils.data.DistributedSampler(shuffle=False) gives.
BOOST_AUTO_TEST_CASE(distributed_pads_by_repeating_the_head) {
  const std::vector<Indices> expected = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  for (int r = 0; r < 3; ++r) {
    const DistributedSampler s(10, 3, r, false);
    BOOST_TEST(s.size() == 4);
    BOOST_TEST(s.total_size() == 12);
    BOOST_TEST(s.indices(0) == expected[static_cast<std::size_t>(r)]);
  }
}

BOOST_AUTO_TEST_CASE(distributed_drop_last_cuts_the_tail) {
  const std::vector<Indices> expected = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int r = 0; r < 3; ++r) {
    const DistributedSampler s(10, 3, r, false, 0, true);
    BOOST_TEST(s.size() == 3);
    BOOST_TEST(s.indices(5) == expected[static_cast<std::size_t>(r)]);
  }
}

BOOST_AUTO_TEST_CASE(distributed_padding_longer_than_the_dataset_repeats_it) {
  // n = 2, 5 ranks: [0, 1] padded to [0, 1, 0, 1, 0].
  const Indices expected = {0, 1, 0, 1, 0};
  for (int r = 0; r < 5; ++r)
    BOOST_TEST(DistributedSampler(2, 5, r, false).indices(0) ==
               Indices{expected[static_cast<std::size_t>(r)]});
  BOOST_TEST(DistributedSampler(2, 5, 3, false, 0, true).size() == 0);
  BOOST_TEST(DistributedSampler(2, 5, 3, false, 0, true).indices(0).empty());
}

BOOST_AUTO_TEST_CASE(distributed_shuffled_shards_are_disjoint_and_cover_the_epoch) {
  for (const std::int64_t n : {12, 13, 100}) {
    for (const int replicas : {1, 2, 3, 4}) {
      for (const bool drop_last : {false, true}) {
        for (std::int64_t epoch : {0, 1}) {
          std::vector<std::int64_t> seen(static_cast<std::size_t>(n), 0);
          std::size_t total = 0;
          std::vector<Indices> shards;
          for (int r = 0; r < replicas; ++r) {
            const DistributedSampler s(n, replicas, r, true, 11, drop_last);
            const Indices mine = s.indices(epoch);
            BOOST_TEST(static_cast<std::int64_t>(mine.size()) == s.size());
            for (auto i : mine) {
              BOOST_REQUIRE(i >= 0 && i < n);
              ++seen[static_cast<std::size_t>(i)];
            }
            total += mine.size();
            shards.push_back(mine);
          }
          const std::int64_t per = drop_last ? n / replicas : (n + replicas - 1) / replicas;
          BOOST_TEST(total == static_cast<std::size_t>(per * replicas));
          const auto max_seen = *std::max_element(seen.begin(), seen.end());
          const auto min_seen = *std::min_element(seen.begin(), seen.end());
          if (n % replicas == 0) {
            BOOST_TEST(max_seen == 1);
            BOOST_TEST(min_seen == 1);
          } else if (drop_last) {
            BOOST_TEST(max_seen == 1);  // disjoint, n % replicas dropped
          } else {
            BOOST_TEST(min_seen == 1);  // everything covered, a few repeated
            BOOST_TEST(max_seen == 2);
          }
          // Interleaving the shards gives back one permutation shared by all ranks.
          Indices interleaved;
          for (std::int64_t k = 0; k < per; ++k)
            for (int r = 0; r < replicas; ++r)
              interleaved.push_back(shards[static_cast<std::size_t>(r)][static_cast<std::size_t>(k)]);
          const Indices head(interleaved.begin(),
                             interleaved.begin() + std::min<std::int64_t>(n, per * replicas));
          std::set<std::int64_t> distinct(head.begin(), head.end());
          BOOST_TEST(distinct.size() == head.size());
        }
      }
    }
  }
  BOOST_TEST(DistributedSampler(100, 4, 1, true, 3).indices(0) !=
             DistributedSampler(100, 4, 1, true, 3).indices(1));
  BOOST_TEST(DistributedSampler(100, 4, 1, true, 3).indices(2) ==
             DistributedSampler(100, 4, 1, true, 3).indices(2));
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_errors) {
  BOOST_CHECK_THROW(DistributedSampler(10, 0, 0), Error);
  BOOST_CHECK_THROW(DistributedSampler(10, 2, 2), Error);
  BOOST_CHECK_THROW(DistributedSampler(10, 2, -1), Error);
  BOOST_CHECK_THROW(RandomSampler(-1), Error);
}

BOOST_AUTO_TEST_SUITE_END()
