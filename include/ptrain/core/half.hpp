#pragma once
// The 16-bit floating-point types: Eigen's, because they work on the host and under nvcc alike.
// half is IEEE binary16 (5 exponent bits), bfloat16 the top half of a float (8 exponent bits).
// Also: which type a sum of them is computed in, and fast bulk conversion to and from float
// (the cast on the wire of compressed gradients).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include <Eigen/Core>

#include "ptrain/core/error.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__)
#include <cpuid.h>
#include <immintrin.h>
#define PTRAIN_HALF_X86 1
#endif

namespace ptrain {

using half = Eigen::half;
using bfloat16 = Eigen::bfloat16;

template <class T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// The type arithmetic on T is carried out in: float for the 16-bit types, T otherwise.
template <class T>
struct accumulate_type {
  using type = T;
};
template <>
struct accumulate_type<half> {
  using type = float;
};
template <>
struct accumulate_type<bfloat16> {
  using type = float;
};
template <class T>
using accumulate_t = typename accumulate_type<T>::type;

// A short name for messages and benchmark lines.
template <class T>
inline constexpr const char* scalar_name = "unknown";
template <>
inline constexpr const char* scalar_name<float> = "float32";
template <>
inline constexpr const char* scalar_name<double> = "float64";
template <>
inline constexpr const char* scalar_name<half> = "float16";
template <>
inline constexpr const char* scalar_name<bfloat16> = "bfloat16";

namespace detail {

#if defined(PTRAIN_HALF_X86)
// x86 fast paths, chosen at run time (the library is built without -march): F16C converts 8
// halves at a time, rounding to nearest even like Eigen's scalar code; AVX2 does the same
// integer rounding for bfloat16.
inline bool cpu_has_f16c() {
#if defined(__clang__) && __clang_major__ < 16  // whose __builtin_cpu_supports does not know "f16c"
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  static const bool has = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) && __builtin_cpu_supports("avx");
#else
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#endif
  return has;
}

__attribute__((target("avx,f16c"))) inline void float_to_half_f16c(const float* src, half* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    alignas(32) float in[8] = {};
    alignas(16) std::uint16_t out[8];
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_load_ps(in), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(static_cast<void*>(dst + i), out, (n - i) * sizeof(std::uint16_t));
  }
}

__attribute__((target("avx,f16c"))) inline void half_to_float_f16c(const half* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {
    alignas(16) std::uint16_t in[8] = {};
    alignas(32) float out[8];
    std::memcpy(in, static_cast<const void*>(src + i), (n - i) * sizeof(std::uint16_t));
    _mm256_store_ps(out, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(dst + i, out, (n - i) * sizeof(float));
  }
}

inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// The scalar bfloat16 rounding below, 8 lanes at a time.
__attribute__((target("avx2"))) inline __m128i float_to_bfloat16_avx2(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)),
                                        _mm256_set1_epi32(0x7fc0));
  const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
  // Pack the 32-bit lanes (each < 2^16) to 16 bits: packus works per 128-bit half, so reorder.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
  return _mm256_castsi256_si128(packed);
}

__attribute__((target("avx2"))) inline void float_to_bfloat16_avx2(const float* src, bfloat16* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     float_to_bfloat16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  if (i < n) {
    alignas(32) float in[8] = {};
    alignas(16) std::uint16_t out[8];
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    _mm_store_si128(reinterpret_cast<__m128i*>(out), float_to_bfloat16_avx2(_mm256_load_si256(reinterpret_cast<const __m256i*>(in))));
    std::memcpy(static_cast<void*>(dst + i), out, (n - i) * sizeof(std::uint16_t));
  }
}

__attribute__((target("avx2"))) inline void bfloat16_to_float_avx2(const bfloat16* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(wide, 16));
  }
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
#endif

// bfloat16 is the float's top 16 bits rounded to nearest even; a NaN becomes the quiet NaN of
// its sign, as in Eigen. Plain integer arithmetic that the compiler vectorises.
inline void float_to_bfloat16(const float* src, bfloat16* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, src + i, sizeof u);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const std::uint16_t bits = static_cast<std::uint16_t>(nan ? (((u >> 16) & 0x8000u) | 0x7fc0u) : rounded);
    std::memcpy(static_cast<void*>(dst + i), &bits, sizeof bits);
  }
}

inline void bfloat16_to_float(const bfloat16* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, static_cast<const void*>(src + i), sizeof bits);
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    std::memcpy(dst + i, &u, sizeof u);
  }
}

}  // namespace detail

// dst[i] = To(src[i]) for every element, as static_cast would, but vectorised for the casts
// between float and the 16-bit types. The spans must have the same size and must not overlap.
template <class From, class To>
void convert(std::span<const From> src, std::span<To> dst) {
  check(src.size() == dst.size(), "convert from ", scalar_name<From>, " to ", scalar_name<To>, ": ", src.size(),
        " source elements but ", dst.size(), " destination elements");
  const std::size_t n = src.size();
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, bfloat16>) {
#if defined(PTRAIN_HALF_X86)
    if (detail::cpu_has_avx2()) return detail::float_to_bfloat16_avx2(src.data(), dst.data(), n);
#endif
    detail::float_to_bfloat16(src.data(), dst.data(), n);
  } else if constexpr (std::is_same_v<From, bfloat16> && std::is_same_v<To, float>) {
#if defined(PTRAIN_HALF_X86)
    if (detail::cpu_has_avx2()) return detail::bfloat16_to_float_avx2(src.data(), dst.data(), n);
#endif
    detail::bfloat16_to_float(src.data(), dst.data(), n);
  } else {
#if defined(PTRAIN_HALF_X86)
    if constexpr (std::is_same_v<From, float> && std::is_same_v<To, half>) {
      if (detail::cpu_has_f16c()) return detail::float_to_half_f16c(src.data(), dst.data(), n);
    } else if constexpr (std::is_same_v<From, half> && std::is_same_v<To, float>) {
      if (detail::cpu_has_f16c()) return detail::half_to_float_f16c(src.data(), dst.data(), n);
    }
#endif
    for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i]);
  }
}

template <class From, class To>
void convert(std::span<From> src, std::span<To> dst) requires(!std::is_const_v<From>) {
  convert(std::span<const From>(src), dst);
}

}  // namespace ptrain
