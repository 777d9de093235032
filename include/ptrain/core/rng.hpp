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

}  // namespace ptrain
