#pragma once
// The host device: 64-byte aligned allocations (full AVX-512 lines), memcpy copies, and a count
// of the bytes of tensor storage alive (what a pipeline stage's activations are measured with),
// with its high-water mark since the last reset_peak_live_bytes().
//
// Blocks of cached_min_bytes and more come from a CachingAllocator: a training step allocates the
// same large sizes every iteration (an LM's 80 MB of logits), and a fresh block from malloc is a
// fresh mmap whose every page faults on first touch. Freed blocks are kept, up to
// cache_limit_bytes() (a quarter of physical memory, at least 1 GiB, unless set_cache_limit_bytes
// says otherwise; none under ASan), and empty_cache() hands them back. The cache keeps within its
// in-use peak and a half (CachingAllocator::set_keep_within_peak): a block that misses first
// unmaps cached ones, so that a step's resident memory stays near its tensors' peak and not that
// plus blocks of the sizes the previous phase freed. live_bytes() stays the bytes asked
// of the device: the cache's own are apart.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include <sys/mman.h>
#include <unistd.h>

#include "ptrain/core/prebuilt.hpp"
#include "ptrain/device/caching_allocator.hpp"
#include "ptrain/device/threads.hpp"

namespace ptrain {

namespace kernels {
struct CpuExecutor;  // kernels/executor.hpp
}

namespace detail {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool under_address_sanitizer = true;
#elif defined(__has_feature)
inline constexpr bool under_address_sanitizer = __has_feature(address_sanitizer);
#else
inline constexpr bool under_address_sanitizer = false;
#endif

// aligned_alloc / free for Cpu's cache under AddressSanitizer (which then reports a use after
// free): out of memory is nullptr.
struct AlignedHostMemory {
  static void* allocate(std::size_t bytes) { return std::aligned_alloc(64, bytes); }
  static void release(void* p, std::size_t) noexcept { std::free(p); }
};
// mmap / munmap for Cpu's cache otherwise: a block given back leaves the resident set at once,
// where malloc's heap would keep it (and split it for smaller requests), so that the cache's
// footprint is what the process holds. Out of memory is nullptr.
struct MappedHostMemory {
  static void* allocate(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  static void release(void* p, std::size_t bytes) noexcept { ::munmap(p, bytes); }
};
using HostMemory = std::conditional_t<under_address_sanitizer, AlignedHostMemory, MappedHostMemory>;
}  // namespace detail

struct Cpu {
  static constexpr std::size_t alignment = 64;
  static constexpr std::size_t cached_min_bytes = std::size_t(64) << 10;
  static constexpr const char* name = "cpu";
  using executor = kernels::CpuExecutor;

  template <class T>
  static T* allocate(std::size_t count) {
    if (count == 0) return nullptr;
    const std::size_t bytes = block_bytes(count * sizeof(T));
    void* p = bytes >= cached_min_bytes ? cache().allocate(bytes) : std::aligned_alloc(alignment, bytes);
    if (!p) throw std::bad_alloc();
    const auto added = static_cast<std::int64_t>(count * sizeof(T));
    const std::int64_t live = live_bytes_.fetch_add(added, std::memory_order_relaxed) + added;
    for (std::int64_t peak = peak_live_bytes_.load(std::memory_order_relaxed);
         live > peak && !peak_live_bytes_.compare_exchange_weak(peak, live, std::memory_order_relaxed);) {
    }
    return static_cast<T*>(p);
  }
  template <class T>
  static void deallocate(T* p, std::size_t count) {
    if (!p) return;
    live_bytes_.fetch_sub(static_cast<std::int64_t>(count * sizeof(T)), std::memory_order_relaxed);
    if (block_bytes(count * sizeof(T)) >= cached_min_bytes) cache().deallocate(p);
    else std::free(p);
  }
  static std::int64_t live_bytes() { return live_bytes_.load(std::memory_order_relaxed); }
  static std::int64_t peak_live_bytes() { return peak_live_bytes_.load(std::memory_order_relaxed); }
  static void reset_peak_live_bytes() { peak_live_bytes_.store(live_bytes(), std::memory_order_relaxed); }
  // The cache of large blocks: its counts, its bound, and handing its free blocks back.
  static AllocatorStats cache_stats() { return cache().stats(); }
  static std::size_t cache_limit_bytes() { return cache().max_cached_bytes(); }
  static void set_cache_limit_bytes(std::size_t bytes) { cache().set_max_cached_bytes(bytes); }
  static void empty_cache() { cache().empty_cache(); }
  template <class T>
  static void copy_to_host(T* host_dst, const T* src, std::size_t count) {
    if (count) std::memcpy(host_dst, src, count * sizeof(T));
  }
  template <class T>
  static void copy_from_host(T* dst, const T* host_src, std::size_t count) {
    if (count) std::memcpy(dst, host_src, count * sizeof(T));
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t count) {
    if (count) std::memcpy(dst, src, count * sizeof(T));
  }
  template <class T>
  static void fill(T* dst, T value, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = value;
  }
  static int threads() { return num_threads(); }

 private:
  static std::size_t block_bytes(std::size_t bytes) { return (bytes + alignment - 1) / alignment * alignment; }
  using Cache = CachingAllocator<detail::HostMemory>;
  // Never destroyed: tensors of static storage may free their blocks after main. Under
  // AddressSanitizer nothing is cached, so that a use after free is still reported.
  static Cache& cache() {
    static Cache* const instance = [] {
      auto* cache = new Cache(detail::under_address_sanitizer ? 0 : default_cache_limit_bytes());
      cache->set_keep_within_peak(true);
      return cache;
    }();
    return *instance;
  }
  // A quarter of physical memory, at least 1 GiB: enough for a step's whole working set (ResNet-50
  // at batch 64 frees several GiB in its backward; under 1 GiB its next forward page-faulted them
  // afresh, 12% of its step).
  static std::size_t default_cache_limit_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGESIZE);
    const std::size_t floor = std::size_t(1) << 30;
    if (pages <= 0 || page_bytes <= 0) return floor;
    return std::max(floor, static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_bytes) / 4);
  }
  static inline std::atomic<std::int64_t> live_bytes_{0};
  static inline std::atomic<std::int64_t> peak_live_bytes_{0};
};

}  // namespace ptrain

// The host cache's allocator, for both of its memories: a program built with AddressSanitizer
// (AlignedHostMemory) against a library built without it finds its own too.
PTRAIN_PREBUILT_CLASS(ptrain::CachingAllocator<ptrain::detail::MappedHostMemory>)
PTRAIN_PREBUILT_CLASS(ptrain::CachingAllocator<ptrain::detail::AlignedHostMemory>)
