#pragma once
// Per-thread scratch buffers that grow and are kept between calls: the im2col columns and
// partial sums of conv run every step, and a fresh multi-megabyte allocation each time costs
// page faults comparable to the small layers' arithmetic.
#include <array>
#include <cstddef>
#include <memory>

#include "ptrain/device/cpu.hpp"

namespace ptrain::kernels {

// Slots a kernel may hold at the same time on one thread.
inline constexpr int scratch_slots = 4;

// A buffer of at least n elements, owned by the calling thread and valid until the same thread
// asks for the same slot again. Contents are unspecified.
template <class T>
T* scratch(int slot, std::size_t n) {
  struct Buffer {
    T* data = nullptr;
    std::size_t size = 0;
    ~Buffer() { Cpu::deallocate(data, size); }
  };
  thread_local std::array<Buffer, scratch_slots> buffers;
  Buffer& b = buffers[static_cast<std::size_t>(slot)];
  if (b.size < n) {
    Cpu::deallocate(b.data, b.size);
    b.data = nullptr;
    b.size = 0;
    b.data = Cpu::allocate<T>(n);
    b.size = n;
  }
  return b.data;
}

}  // namespace ptrain::kernels
