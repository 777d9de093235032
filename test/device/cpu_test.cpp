// Cpu's memory: large blocks come back from its cache after a free, small ones and the live-byte
// counts are as before, the cache keeps to its bound and empties on request, and what it gives
// back leaves the process.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include <sys/mman.h>
#include <unistd.h>

#include <ptrain/device/cpu.hpp>

using ptrain::Cpu;

BOOST_AUTO_TEST_SUITE(cpu_test)

namespace {

// Restores the cache's bound when a test that changed it ends.
struct CacheLimitGuard {
  std::size_t saved = Cpu::cache_limit_bytes();
  ~CacheLimitGuard() { Cpu::set_cache_limit_bytes(saved); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_cache_holds_a_quarter_of_physical_memory_and_at_least_1_gib) {
  if (ptrain::detail::under_address_sanitizer) return;  // nothing cached (the next case checks it)
  const std::size_t physical = static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) *
                               static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  BOOST_TEST(Cpu::cache_limit_bytes() == std::max(std::size_t(1) << 30, physical / 4));
}

BOOST_AUTO_TEST_CASE(a_freed_large_block_serves_the_next_request_of_its_size) {
  if (ptrain::detail::under_address_sanitizer) {
    BOOST_TEST(Cpu::cache_limit_bytes() == 0u);  // nothing cached, so ASan sees every use after free
    return;
  }
  constexpr std::size_t floats = 1 << 20;  // 4 MiB
  float* first = Cpu::allocate<float>(floats);
  first[floats - 1] = 1;
  Cpu::deallocate(first, floats);
  const auto before = Cpu::cache_stats();
  float* second = Cpu::allocate<float>(floats);
  BOOST_TEST(second == first);
  BOOST_TEST(Cpu::cache_stats().cache_hits == before.cache_hits + 1);
  BOOST_TEST(Cpu::cache_stats().raw_allocations == before.raw_allocations);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(second) % Cpu::alignment == 0u);
  Cpu::deallocate(second, floats);
}

BOOST_AUTO_TEST_CASE(live_bytes_count_what_was_asked_not_what_the_cache_holds) {
  const std::int64_t live = Cpu::live_bytes();
  constexpr std::size_t floats = 100001;  // 400,004 bytes: cached, in a block rounded to 512
  float* p = Cpu::allocate<float>(floats);
  BOOST_TEST(Cpu::live_bytes() - live == 400004);
  Cpu::deallocate(p, floats);
  BOOST_TEST(Cpu::live_bytes() == live);
  char* small = Cpu::allocate<char>(100);  // below cached_min_bytes: straight from malloc
  BOOST_TEST(Cpu::live_bytes() - live == 100);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(small) % Cpu::alignment == 0u);
  Cpu::deallocate(small, 100);
  BOOST_TEST(Cpu::live_bytes() == live);
}

BOOST_AUTO_TEST_CASE(the_cache_keeps_to_its_bound_and_empties_on_request) {
  CacheLimitGuard guard;
  Cpu::set_cache_limit_bytes(std::size_t(3) << 20);
  BOOST_TEST(Cpu::cache_stats().cached_bytes <= std::size_t(3) << 20);
  constexpr std::size_t floats = std::size_t(1) << 20;  // 4 MiB each: over the bound
  float* a = Cpu::allocate<float>(floats);
  Cpu::deallocate(a, floats);
  BOOST_TEST(Cpu::cache_stats().cached_bytes <= std::size_t(3) << 20);
  float* b = Cpu::allocate<float>(floats / 8);  // 512 KiB: within it, cached
  Cpu::deallocate(b, floats / 8);
  if (!ptrain::detail::under_address_sanitizer) BOOST_TEST(Cpu::cache_stats().cached_bytes >= std::size_t(512) << 10);
  Cpu::empty_cache();
  BOOST_TEST(Cpu::cache_stats().cached_bytes == 0u);
}

// The cache's blocks are mapped for it alone: one given back leaves the process at once (its page
// is no longer mapped), where malloc would keep a block of this size in its heap.
BOOST_AUTO_TEST_CASE(a_block_the_cache_gives_back_leaves_the_process) {
  if (ptrain::detail::under_address_sanitizer) return;  // blocks come from malloc there (the case above)
  constexpr std::size_t bytes = 100000;  // cached (over cached_min_bytes), under malloc's mmap threshold
  char* p = Cpu::allocate<char>(bytes);
  p[0] = 1;
  const long page = ::sysconf(_SC_PAGESIZE);
  void* first_page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) / page * page);
  unsigned char resident = 0;
  BOOST_TEST(::mincore(first_page, 1, &resident) == 0);
  Cpu::deallocate(p, bytes);
  Cpu::empty_cache();
  BOOST_TEST(::mincore(first_page, 1, &resident) == -1);
  BOOST_TEST(errno == ENOMEM);
}

BOOST_AUTO_TEST_SUITE_END()
