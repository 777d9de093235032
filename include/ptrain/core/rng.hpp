#pragma once
// A seedable random source. One generator per purpose (init, dropout, shuffle) keeps runs
// reproducible whatever order the purposes draw in.
#include <cstdint>
#include <random>

namespace ptrain {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) : engine_(seed) {}
  void seed(std::uint64_t s) { engine_.seed(s); }
  double uniform(double lo = 0.0, double hi = 1.0) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  double normal(double mean = 0.0, double stddev = 1.0) {
    return std::normal_distribution<double>(mean, stddev)(engine_);
  }
  bool bernoulli(double p) { return uniform() < p; }
  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(engine_); }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// The generator used by parameter initialisation and dropout unless one is given.
inline Rng& global_rng() {
  thread_local Rng rng(5489u);
  return rng;
}
inline void manual_seed(std::uint64_t seed) { global_rng().seed(seed); }

namespace detail {
// SplitMix64 finaliser: spreads (seed, epoch, stream) over the 64 bits so that neighbouring
// seeds do not give correlated Mersenne Twister states.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream = 0) {
  return mix64(mix64(mix64(seed) ^ epoch) ^ stream);
}
}  // namespace detail

}  // namespace ptrain
