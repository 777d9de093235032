// The caching allocator's bookkeeping, over a counting malloc standing in for cudaMalloc.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <ptrain/device/caching_allocator.hpp>

BOOST_AUTO_TEST_SUITE(caching_allocator_test)

namespace {

struct CountingMalloc {
  static inline int allocations = 0;
  static inline int releases = 0;
  static inline std::size_t limit = std::size_t(1) << 40;  // bytes the "device" holds
  static inline std::size_t held = 0;
  static void* allocate(std::size_t bytes) {
    if (held + bytes > limit) return nullptr;
    held += bytes;
    ++allocations;
    return std::malloc(bytes);
  }
  static void release(void* p, std::size_t bytes) noexcept {
    held -= bytes;
    ++releases;
    std::free(p);
  }
  static void reset(std::size_t new_limit = std::size_t(1) << 40) {
    allocations = releases = 0;
    held = 0;
    limit = new_limit;
  }
};

using Allocator = ptrain::CachingAllocator<CountingMalloc>;

}  // namespace

BOOST_AUTO_TEST_CASE(sizes_round_to_512_bytes_then_to_2_mib) {
  BOOST_TEST(Allocator::rounded(1) == 512u);
  BOOST_TEST(Allocator::rounded(512) == 512u);
  BOOST_TEST(Allocator::rounded(513) == 1024u);
  BOOST_TEST(Allocator::rounded(1 << 20) == std::size_t(1) << 20);
  BOOST_TEST(Allocator::rounded((1 << 20) + 1) == std::size_t(2) << 20);
  BOOST_TEST(Allocator::rounded((5 << 20) + 7) == std::size_t(6) << 20);
}

BOOST_AUTO_TEST_CASE(a_repeated_step_reaches_the_raw_allocator_only_the_first_time) {
  CountingMalloc::reset();
  {
    Allocator a;
    const std::vector<std::size_t> step{4000, 1 << 22, 96, 4000, 700000, 3 << 20};
    for (int iteration = 0; iteration < 5; ++iteration) {
      std::vector<void*> blocks;
      for (std::size_t bytes : step) blocks.push_back(a.allocate(bytes));
      BOOST_TEST(std::set<void*>(blocks.begin(), blocks.end()).size() == blocks.size());
      for (void* p : blocks) BOOST_TEST(a.deallocate(p));
    }
    const auto s = a.stats();
    BOOST_TEST(s.raw_allocations == step.size());
    BOOST_TEST(CountingMalloc::allocations == static_cast<int>(step.size()));
    BOOST_TEST(s.cache_hits == 4 * step.size());
    BOOST_TEST(s.in_use_bytes == 0u);
    BOOST_TEST(s.peak_in_use_bytes == 2 * 4096u + 512u + (4u << 20) + 700416u + (4u << 20));
    BOOST_TEST(s.cached_bytes == s.peak_in_use_bytes);
  }
  BOOST_TEST(CountingMalloc::releases == CountingMalloc::allocations);  // the destructor empties the cache
  BOOST_TEST(CountingMalloc::held == 0u);
}

BOOST_AUTO_TEST_CASE(a_cached_block_serves_a_request_at_most_a_quarter_smaller) {
  CountingMalloc::reset();
  Allocator a;
  void* big = a.allocate(10000);  // 10240 bytes
  BOOST_TEST(a.deallocate(big));
  void* small = a.allocate(2000);  // 2048: far smaller, a block of its own
  BOOST_TEST(small != big);
  void* close = a.allocate(8500);  // 8704: within a quarter of 10240, reuses it
  BOOST_TEST(close == big);
  BOOST_TEST(a.stats().in_use_bytes == 2048u + 10240u);
  a.deallocate(small);
  a.deallocate(close);
}

BOOST_AUTO_TEST_CASE(out_of_memory_releases_the_cache_and_retries) {
  CountingMalloc::reset(4 << 20);
  Allocator a;
  void* p = a.allocate(2 << 20);
  a.deallocate(p);
  BOOST_TEST(a.stats().cached_bytes == std::size_t(2) << 20);
  void* q = a.allocate(4 << 20);  // only fits once the cached 2 MiB go back
  BOOST_TEST(q != nullptr);
  BOOST_TEST(CountingMalloc::releases == 1);
  BOOST_TEST(a.stats().cached_bytes == 0u);
  std::string message;
  try {
    a.allocate(1 << 20);
  } catch (const ptrain::Error& e) {
    message = e.what();
  }
  BOOST_TEST(message.find("out of device memory allocating 1048576 bytes") != std::string::npos, message);
  BOOST_TEST(message.find("4194304 bytes in use") != std::string::npos, message);
  a.deallocate(q);
}

BOOST_AUTO_TEST_CASE(freeing_a_foreign_pointer_is_refused) {
  CountingMalloc::reset();
  Allocator a;
  int local = 0;
  BOOST_TEST(!a.deallocate(&local));
  BOOST_TEST(a.deallocate(nullptr));
  void* p = a.allocate(100);
  BOOST_TEST(a.deallocate(p));
  BOOST_TEST(!a.deallocate(p));  // twice: the second is not a live block
}

BOOST_AUTO_TEST_CASE(empty_cache_returns_free_blocks_and_keeps_live_ones) {
  CountingMalloc::reset();
  Allocator a;
  void* live = a.allocate(1000);
  void* freed = a.allocate(5000);
  a.deallocate(freed);
  a.empty_cache();
  BOOST_TEST(CountingMalloc::releases == 1);
  BOOST_TEST(a.stats().in_use_bytes == 1024u);
  a.deallocate(live);
}

BOOST_AUTO_TEST_CASE(a_bounded_cache_releases_what_would_exceed_its_bound) {
  CountingMalloc::reset();
  Allocator a(3000);
  void* first = a.allocate(2048);
  void* second = a.allocate(1024);
  void* third = a.allocate(512);
  a.deallocate(first);
  a.deallocate(second);  // 2048 + 1024 > 3000: released, not cached
  a.deallocate(third);
  BOOST_TEST(CountingMalloc::releases == 1);
  BOOST_TEST(a.stats().cached_bytes == 2048u + 512u);
  BOOST_TEST(a.allocate(2048) == first);  // the cached ones are still reused
  BOOST_TEST(a.stats().cache_hits == 1u);
  a.set_max_cached_bytes(0);  // the free 512 bytes go back at once
  BOOST_TEST(CountingMalloc::releases == 2);
  BOOST_TEST(a.stats().cached_bytes == 0u);
  a.deallocate(first);
  BOOST_TEST(CountingMalloc::releases == 3);
  BOOST_TEST(CountingMalloc::held == 0u);
}

BOOST_AUTO_TEST_CASE(lowering_the_bound_releases_the_largest_blocks_first) {
  CountingMalloc::reset();
  Allocator a;
  std::vector<void*> blocks{a.allocate(512), a.allocate(4096), a.allocate(1024)};
  for (void* p : blocks) a.deallocate(p);
  a.set_max_cached_bytes(2000);
  BOOST_TEST(a.max_cached_bytes() == 2000u);
  BOOST_TEST(CountingMalloc::releases == 1);
  BOOST_TEST(a.stats().cached_bytes == 512u + 1024u);
}

// Kept within its peak, a miss first gives back cached blocks, largest first, until what the raw
// allocator holds with the new block is no more than the in-use peak so far and a half (10752
// bytes here); by default it keeps them and holds more.
BOOST_AUTO_TEST_CASE(a_cache_kept_within_its_peak_gives_back_what_a_miss_would_add) {
  for (bool within_peak : {true, false}) {
    BOOST_TEST_CONTEXT("keep within peak " << within_peak) {
      CountingMalloc::reset();
      Allocator a;
      a.set_keep_within_peak(within_peak);
      void* large = a.allocate(4096);
      void* kept = a.allocate(2048);
      void* small = a.allocate(1024);  // in use peak: 7168
      a.deallocate(large);
      a.deallocate(small);
      void* other = a.allocate(6000);  // 6144: no cached block is large enough, a miss
      const auto stats = a.stats();
      BOOST_TEST(stats.peak_in_use_bytes == 2048u + 6144u);
      if (within_peak) {
        // 2048 + 4096 + 1024 + 6144 = 13312 would pass the bound: the 4096 block goes; the 1024 one fits.
        BOOST_TEST(CountingMalloc::releases == 1);
        BOOST_TEST(stats.cached_bytes == 1024u);
        BOOST_TEST(CountingMalloc::held == 2048u + 1024u + 6144u);
        BOOST_TEST(stats.peak_reserved_bytes == 2048u + 1024u + 6144u);
      } else {
        BOOST_TEST(CountingMalloc::releases == 0);
        BOOST_TEST(CountingMalloc::held == 4096u + 2048u + 1024u + 6144u);
        BOOST_TEST(stats.peak_reserved_bytes == CountingMalloc::held);
      }
      a.deallocate(kept);
      a.deallocate(other);
    }
  }
}

// A step whose blocks add up to more than its in-use peak and an eighth, within a half: two of
// 4096 bytes at once (the peak, 8192), then one of 2560 that neither may serve (over a quarter
// larger). From the second step on everything is reused; with an eighth each step gave back a
// block and mapped one again (the small CNN's step: 52 MB, 13,000 page faults, half its time).
BOOST_AUTO_TEST_CASE(a_cache_kept_within_its_peak_maps_nothing_new_in_a_repeated_step) {
  CountingMalloc::reset();
  Allocator a;
  a.set_keep_within_peak(true);
  const auto step = [&] {
    void* activations = a.allocate(4096);
    void* gradients = a.allocate(4096);
    a.deallocate(activations);
    a.deallocate(gradients);
    void* index = a.allocate(2560);
    a.deallocate(index);
  };
  step();
  step();
  const int allocations = CountingMalloc::allocations;
  for (int i = 0; i < 5; ++i) step();
  BOOST_TEST(CountingMalloc::allocations == allocations);
  BOOST_TEST(CountingMalloc::releases == 0);
  BOOST_TEST(a.stats().peak_reserved_bytes == 4096u + 4096u + 2560u);
}

BOOST_AUTO_TEST_SUITE_END()
