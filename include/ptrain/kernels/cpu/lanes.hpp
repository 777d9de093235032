#pragma once
// A SIMD register of T as a GCC vector, for the CPU kernels whose loops must be vectorised by hand:
// the build turns GCC 12's SLP vectoriser off (see docs/architecture.md), and the loop vectoriser
// leaves float sums alone, whose order it may not change. bfloat16 goes in and out of float lanes
// here: widened by a shift, rounded as half.hpp rounds. nvcc's host front end stops with an
// internal error on GCC vectors, so a CUDA translation unit (whose CPU kernels are the --device cpu
// fallback) gets lanes of one, and the bfloat16 helpers not at all.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ptrain/core/half.hpp"

namespace ptrain::kernels::lanes {

#if defined(__CUDACC__)
template <class T>
inline constexpr int lanes = 1;
template <class T>
using Lanes = T;
#else
#if defined(__AVX512F__)
inline constexpr int vector_bytes = 64;
#else
inline constexpr int vector_bytes = 32;
#endif
template <class T>
inline constexpr int lanes = vector_bytes / static_cast<int>(sizeof(T));
template <class T>
struct LaneVector;
template <>
struct LaneVector<float> {
  typedef float type __attribute__((vector_size(vector_bytes)));
};
template <>
struct LaneVector<double> {
  typedef double type __attribute__((vector_size(vector_bytes)));
};
template <class T>
using Lanes = typename LaneVector<T>::type;
#endif

// from[0, channels) as a vector, the lanes past them zero.
template <class T>
inline Lanes<T> load_lanes(const T* from, int channels) {
  Lanes<T> v;
  if (channels == lanes<T>) {
    std::memcpy(&v, from, sizeof(v));
  } else {
    alignas(64) T values[lanes<T>] = {};
    std::copy(from, from + channels, values);
    std::memcpy(&v, values, sizeof(v));
  }
  return v;
}

#if !defined(__CUDACC__)
typedef std::uint32_t LaneWords __attribute__((vector_size(vector_bytes)));
typedef std::uint16_t LaneHalves __attribute__((vector_size(vector_bytes / 2)));

// The lanes of v rounded to bfloat16 as half.hpp's float_to_bfloat16 does (to nearest even, a NaN
// the quiet NaN of its sign), their bits.
inline LaneHalves bfloat16_bits(const Lanes<float>& v) {
  LaneWords u;
  std::memcpy(&u, &v, sizeof u);
  const LaneWords rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const LaneWords quiet = ((u >> 16) & 0x8000u) | 0x7fc0u;
  const LaneWords nan = reinterpret_cast<LaneWords>((u & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
  return __builtin_convertvector((rounded & ~nan) | (quiet & nan), LaneHalves);
}

// lanes<float> bfloat16 values from `from` on, exactly, as float lanes.
inline Lanes<float> widened(const bfloat16* from) {
  LaneHalves bits;
  std::memcpy(&bits, static_cast<const void*>(from), sizeof bits);
  const LaneWords words = __builtin_convertvector(bits, LaneWords) << 16;
  Lanes<float> v;
  std::memcpy(&v, &words, sizeof v);
  return v;
}

// to[0, lanes<float>) = v rounded to bfloat16.
inline void store_rounded(const Lanes<float>& v, bfloat16* to) {
  const LaneHalves bits = bfloat16_bits(v);
  std::memcpy(static_cast<void*>(to), &bits, sizeof bits);
}

// The sum of v's lanes in double, lane 0 first.
inline double lane_sum(const Lanes<float>& v) {
  double s = 0;
  for (int l = 0; l < lanes<float>; ++l) s += static_cast<double>(v[l]);
  return s;
}
#endif

}  // namespace ptrain::kernels::lanes
