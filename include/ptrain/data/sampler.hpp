#pragma once
// Samplers: the order in which a loader visits a dataset's indices in one epoch. A sampler is a
// pure function of the epoch number, so every rank (and every rerun) that asks for epoch e with
// the same seed gets the same order, whatever happened before.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <random>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/rng.hpp"

namespace ptrain {

// What DataLoader asks of a sampler: how many indices an epoch yields, and the indices of epoch e.
template <class S>
concept Sampler = requires(const S& s, std::int64_t epoch) {
  { s.size() } -> std::convertible_to<std::int64_t>;
  { s.indices(epoch) } -> std::same_as<std::vector<std::int64_t>>;
};

// The archetype of Sampler: the least a type must provide.
struct SamplerArchetype {
  std::int64_t size() const { return 0; }
  std::vector<std::int64_t> indices(std::int64_t /*epoch*/) const { return {}; }
};
static_assert(Sampler<SamplerArchetype>);

namespace detail {

// Uniform integer in [0, n) by rejection: unlike std::uniform_int_distribution its output is the
// same with every standard library, so permutations are reproducible across platforms.
inline std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t n) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n + 1) % n;
  std::uint64_t r = engine();
  while (r > limit) r = engine();
  return r % n;
}

// A random permutation of 0..n-1 (Fisher-Yates), fixed by the seed.
std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed);

inline std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  return order;
}

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::mt19937_64 engine(seed);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = uniform_below(engine, static_cast<std::uint64_t>(i) + 1);
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}
#endif

}  // namespace detail

// 0, 1, ..., n-1 every epoch.
class SequentialSampler {
 public:
  explicit SequentialSampler(std::int64_t n) : n_(n) {
    check(n >= 0, "SequentialSampler: expected a non-negative dataset size, got ", n);
  }
  std::int64_t size() const { return n_; }
  std::vector<std::int64_t> indices(std::int64_t /*epoch*/) const { return detail::iota(n_); }

 private:
  std::int64_t n_;
};

// A fresh permutation of 0..n-1 each epoch, the same for the same (seed, epoch).
class RandomSampler {
 public:
  explicit RandomSampler(std::int64_t n, std::uint64_t seed = 0) : n_(n), seed_(seed) {
    check(n >= 0, "RandomSampler: expected a non-negative dataset size, got ", n);
  }
  std::int64_t size() const { return n_; }
  std::uint64_t seed() const { return seed_; }
  std::vector<std::int64_t> indices(std::int64_t epoch) const {
    return detail::permutation(n_, detail::mix_seed(seed_, static_cast<std::uint64_t>(epoch)));
  }

 private:
  std::int64_t n_;
  std::uint64_t seed_;
};

// One rank's shard of an epoch, with torch.utils.data.DistributedSampler's semantics: all ranks
// draw the same permutation (same seed and epoch, so the seed must be equal on every rank), and
// rank r takes positions r, r + R, r + 2R, ... of it. Without drop_last the permutation is padded
// by repeating its head until it divides evenly, so every rank gets ceil(n / R) indices; with
// drop_last the tail is cut so every rank gets floor(n / R) indices and none is repeated.
class DistributedSampler {
 public:
  DistributedSampler(std::int64_t n, int num_replicas, int rank, bool shuffle = true, std::uint64_t seed = 0,
                     bool drop_last = false)
      : n_(n),
        num_replicas_(num_replicas),
        rank_(rank),
        shuffle_(shuffle),
        seed_(seed),
        drop_last_(drop_last) {
    check(n >= 0, "DistributedSampler: expected a non-negative dataset size, got ", n);
    check(num_replicas > 0, "DistributedSampler: expected a positive number of replicas, got ", num_replicas);
    check(rank >= 0 && rank < num_replicas, "DistributedSampler: rank ", rank, " out of range: expected 0..",
          num_replicas - 1);
    per_rank_ = drop_last ? n / num_replicas : (n + num_replicas - 1) / num_replicas;
  }

  std::int64_t size() const { return per_rank_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  std::uint64_t seed() const { return seed_; }
  // Indices handed out per epoch over all ranks: n rounded up (padding) or down (drop_last).
  std::int64_t total_size() const { return per_rank_ * num_replicas_; }

  std::vector<std::int64_t> indices(std::int64_t epoch) const {
    std::vector<std::int64_t> all =
        shuffle_ ? detail::permutation(n_, detail::mix_seed(seed_, static_cast<std::uint64_t>(epoch)))
                 : detail::iota(n_);
    const auto total = static_cast<std::size_t>(total_size());
    if (all.size() < total && !all.empty()) {
      const std::size_t n = all.size();
      all.reserve(total);
      for (std::size_t i = n; i < total; ++i) all.push_back(all[(i - n) % n]);
    }
    std::vector<std::int64_t> mine;
    mine.reserve(static_cast<std::size_t>(per_rank_));
    for (std::size_t i = static_cast<std::size_t>(rank_); i < total;
         i += static_cast<std::size_t>(num_replicas_))
      mine.push_back(all[i]);
    return mine;
  }

 private:
  std::int64_t n_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
  std::int64_t per_rank_ = 0;
};

}  // namespace ptrain
