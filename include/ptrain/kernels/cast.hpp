#pragma once
// The dispatch points of the element casts between float, double, half and bfloat16 on raw
// device memory (mixed precision's masters, data parallel's gradient buckets): Cpu's executor
// runs core/half.hpp's vectorised convert over the threads, any other executor kernels/indexed/elementwise.hpp.
#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"

namespace ptrain::kernels {

// dst[i] = To(src[i]); src and dst must not overlap.
template <class From, class To>
void cast(const CpuExecutor&, const From* src, To* dst, std::int64_t n) {
  ProfiledOp profiled("cast");
  check(n >= 0, "cast: negative element count ", n);
  detail::parallel_ranges(n, [src, dst](std::int64_t begin, std::int64_t end) {
    const auto count = static_cast<std::size_t>(end - begin);
    convert(std::span<const From>(src + begin, count), std::span<To>(dst + begin, count));
  });
}
template <class Ex, class From, class To>
void cast(const Ex& ex, const From* src, To* dst, std::int64_t n) {
  indexed::cast(ex, src, dst, n);
}

// dst[i] = To(src[i]) * scale; From may equal To and then src may equal dst.
template <class From, class To>
void cast_scaled(const CpuExecutor&, const From* src, To* dst, std::int64_t n, accumulate_t<To> scale) {
  ProfiledOp profiled("cast");
  check(n >= 0, "cast_scaled: negative element count ", n);
  const auto s = static_cast<To>(scale);
  if constexpr (std::is_same_v<From, To>) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i] * s;
  } else {
    // A cache-sized chunk at a time: a whole-tensor cast followed by a whole-tensor scale would
    // read and write it twice.
    constexpr std::int64_t chunk = 4096;
    for (std::int64_t at = 0; at < n; at += chunk) {
      const auto m = static_cast<std::size_t>(std::min(chunk, n - at));
      convert(std::span<const From>(src + at, m), std::span<To>(dst + at, m));
      for (std::int64_t i = at; i < at + static_cast<std::int64_t>(m); ++i) dst[i] *= s;
    }
  }
}
template <class Ex, class From, class To>
void cast_scaled(const Ex& ex, const From* src, To* dst, std::int64_t n, accumulate_t<To> scale) {
  indexed::cast_scaled(ex, src, dst, n, scale);
}

}  // namespace ptrain::kernels
