#pragma once
// A caching allocator over a raw one (cudaMalloc for the Cuda device): freed blocks are kept and
// handed out again, so a training step that allocates the same sizes every iteration stops
// calling the raw allocator (and cudaFree's device-wide synchronisation) after the first one.
// As PyTorch's, sizes round up (512-byte steps below 1 MiB, 2 MiB steps above) and a cached
// block is reused for a request it exceeds by at most a quarter. When the raw allocator runs out,
// the cache is released and the request retried once. The cache may be bounded: a freed block that
// would take the cached bytes over max_cached_bytes goes straight back to the raw allocator.
// It may also keep within its peak (set_keep_within_peak): on a miss, cached blocks go back to
// the raw allocator, largest first, until the bytes it holds (in use, cached, and the request)
// are no more than the in-use peak so far and a half, so that the blocks of sizes a step no
// longer asks for do not add to its footprint. The half is what a step's own blocks of several
// sizes need: with an eighth the small CNN's step gave back and mapped again 52 MB every step
// (13,000 page faults), half its time, and ResNet-18's bf16 step lost 14%; with none, VGG-16's
// fp32 step did so too, 15-20% slower. Worth it where giving back is cheap and leaves the
// resident set (Cpu's mmap'd blocks); not where it costs a device synchronisation (cudaFree).
//
// Raw: static void* allocate(std::size_t bytes) (nullptr when out of memory, throws on other
// errors) and static void release(void* p, std::size_t bytes) (must not throw).
//
// Reuse is stream-ordered: a block freed on the host may still be read by queued kernels, which
// is safe for work queued later on the same (compute) stream. Work on another stream must be
// ordered against the compute stream with events before its buffers are freed or reused
// (NcclComm and the pinned uploader do this).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

#include "ptrain/core/error.hpp"

namespace ptrain {

struct AllocatorStats {
  std::size_t in_use_bytes = 0;       // handed out and not yet freed (rounded sizes)
  std::size_t cached_bytes = 0;       // held in the cache, free for reuse
  std::size_t peak_in_use_bytes = 0;
  std::size_t peak_reserved_bytes = 0;  // high-water of in use + cached: what the raw allocator holds
  std::uint64_t raw_allocations = 0;  // calls that reached the raw allocator
  std::uint64_t cache_hits = 0;
};

template <class Raw>
class CachingAllocator {
 public:
  static constexpr std::size_t small_step = 512;
  static constexpr std::size_t large_threshold = std::size_t(1) << 20;
  static constexpr std::size_t large_step = std::size_t(2) << 20;

  static constexpr std::size_t unbounded = SIZE_MAX;

  explicit CachingAllocator(std::size_t max_cached_bytes = unbounded) : max_cached_bytes_(max_cached_bytes) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() { empty_cache(); }

  static std::size_t rounded(std::size_t bytes) {
    const std::size_t step = bytes <= large_threshold ? small_step : large_step;
    return (bytes + step - 1) / step * step;
  }

  void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const std::size_t size = rounded(bytes);
    std::lock_guard lock(mutex_);
    void* p = take_cached(size);
    if (!p) {
      if (keep_within_peak_) {
        const std::size_t bound =
            std::max(stats_.peak_in_use_bytes + stats_.peak_in_use_bytes / 2, stats_.in_use_bytes + size);
        release_largest_until(bound - stats_.in_use_bytes - size);
      }
      p = Raw::allocate(size);
      if (!p) {
        release_cache();
        p = Raw::allocate(size);
      }
      if (!p)
        fail("out of device memory allocating ", bytes, " bytes (", stats_.in_use_bytes, " bytes in use, peak ",
             stats_.peak_in_use_bytes, ")");
      ++stats_.raw_allocations;
      block_size_[p] = size;
      reserved_bytes_ += size;
      stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, reserved_bytes_);
    }
    live_[p] = block_size_[p];
    stats_.in_use_bytes += live_[p];
    if (stats_.in_use_bytes > stats_.peak_in_use_bytes) stats_.peak_in_use_bytes = stats_.in_use_bytes;
    return p;
  }

  // Returns p's block to the cache; false (and nothing done) when p is not one of ours.
  bool deallocate(void* p) noexcept {
    if (!p) return true;
    std::lock_guard lock(mutex_);
    const auto it = live_.find(p);
    if (it == live_.end()) return false;
    const std::size_t size = it->second;
    stats_.in_use_bytes -= size;
    live_.erase(it);
    if (size > max_cached_bytes_ - stats_.cached_bytes) {
      release_block(p, size);
      return true;
    }
    stats_.cached_bytes += size;
    free_.emplace(size, p);
    return true;
  }

  // Bounds the cache from now on (blocks over the new bound are released, largest first).
  void set_max_cached_bytes(std::size_t bytes) noexcept {
    std::lock_guard lock(mutex_);
    max_cached_bytes_ = bytes;
    release_largest_until(max_cached_bytes_);
  }
  std::size_t max_cached_bytes() const {
    std::lock_guard lock(mutex_);
    return max_cached_bytes_;
  }
  // Whether a miss first gives back cached blocks over the in-use peak and a half (see the top);
  // off by default.
  void set_keep_within_peak(bool on) noexcept {
    std::lock_guard lock(mutex_);
    keep_within_peak_ = on;
  }

  // Hands every cached block back to the raw allocator (blocks in use stay).
  void empty_cache() noexcept {
    std::lock_guard lock(mutex_);
    release_cache();
  }

  AllocatorStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  void* take_cached(std::size_t size) {
    const auto it = free_.lower_bound(size);
    if (it == free_.end() || it->first > size + size / 4) return nullptr;
    void* p = it->second;
    stats_.cached_bytes -= it->first;
    free_.erase(it);
    ++stats_.cache_hits;
    return p;
  }
  void release_cache() noexcept {
    for (const auto& [size, p] : free_) release_block(p, size);
    free_.clear();
    stats_.cached_bytes = 0;
  }

  void release_largest_until(std::size_t cached_bytes) noexcept {
    while (stats_.cached_bytes > cached_bytes) {
      const auto largest = std::prev(free_.end());
      release_block(largest->second, largest->first);
      stats_.cached_bytes -= largest->first;
      free_.erase(largest);
    }
  }
  void release_block(void* p, std::size_t size) noexcept {
    Raw::release(p, size);
    block_size_.erase(p);
    reserved_bytes_ -= size;
  }

  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;           // cached blocks by size
  std::unordered_map<void*, std::size_t> live_;      // handed-out blocks
  std::unordered_map<void*, std::size_t> block_size_;  // every block we own
  std::size_t max_cached_bytes_;
  std::size_t reserved_bytes_ = 0;  // in use + cached
  bool keep_within_peak_ = false;
  AllocatorStats stats_;
};

}  // namespace ptrain
