#pragma once
// The host device: 64-byte aligned allocations (full AVX-512 lines), memcpy copies.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ptrain/device/threads.hpp"

namespace ptrain {

struct Cpu {
  static constexpr std::size_t alignment = 64;
  static constexpr const char* name = "cpu";

  template <class T>
  static T* allocate(std::size_t count) {
    if (count == 0) return nullptr;
    const std::size_t bytes = (count * sizeof(T) + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, bytes);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  template <class T>
  static void deallocate(T* p, std::size_t) {
    std::free(p);
  }
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
};

}  // namespace ptrain
