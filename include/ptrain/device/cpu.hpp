#pragma once
// The host device: 64-byte aligned allocations (full AVX-512 lines), memcpy copies, and a count
// of the bytes of tensor storage alive (what a pipeline stage's activations are measured with),
// with its high-water mark since the last reset_peak_live_bytes().
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ptrain/device/threads.hpp"

namespace ptrain {

namespace kernels {
struct CpuExecutor;  // kernels/executor.hpp
}

struct Cpu {
  static constexpr std::size_t alignment = 64;
  static constexpr const char* name = "cpu";
  using executor = kernels::CpuExecutor;

  template <class T>
  static T* allocate(std::size_t count) {
    if (count == 0) return nullptr;
    const std::size_t bytes = (count * sizeof(T) + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, bytes);
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
    if (p) live_bytes_.fetch_sub(static_cast<std::int64_t>(count * sizeof(T)), std::memory_order_relaxed);
    std::free(p);
  }
  static std::int64_t live_bytes() { return live_bytes_.load(std::memory_order_relaxed); }
  static std::int64_t peak_live_bytes() { return peak_live_bytes_.load(std::memory_order_relaxed); }
  static void reset_peak_live_bytes() { peak_live_bytes_.store(live_bytes(), std::memory_order_relaxed); }
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
  static inline std::atomic<std::int64_t> live_bytes_{0};
  static inline std::atomic<std::int64_t> peak_live_bytes_{0};
};

}  // namespace ptrain
