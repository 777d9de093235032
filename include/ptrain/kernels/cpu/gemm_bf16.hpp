#pragma once
// bfloat16 GEMM on AVX512_BF16, chosen at run time: C (float) = alpha * op(A) * op(B) + beta * C
// with A and B in bfloat16, row-major. vdpbf16ps multiplies pairs of bfloat16 and adds both
// products into a float lane, so K is walked two at a time: B is packed into panels of 32 columns
// whose k-pairs sit side by side (one 32-bit word per column and pair), A into micro-panels of 8
// rows whose pairs are broadcast, and an 8 x 32 tile of C accumulates in 16 registers (GotoBLAS
// blocking: a panel of B stays in L1, the packed block of A in L2). An odd K is padded with a
// zero. The functions are compiled for AVX-512 by target attributes whatever the build's -march,
// and called only where the CPU has the instructions (cpu_bf16_gemm_enabled). vdpbf16ps reads
// bfloat16 denormals as zero and adds each pair's products in float.
// Where the CPU has AMX (cpu_amx_enabled), the same packed B feeds tiles instead: a 32 x 32 block
// of C accumulates in four 16 x 16 float tiles (tdpbf16ps, 16 pairs a step), several times
// vdpbf16ps's rate. Each element's products still add in k order within a k-block, on any split.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/scratch.hpp"

namespace ptrain::kernels {

// Whether this CPU executes vdpbf16ps (AVX512_BF16, with AVX512F/BW/VL for the packing).
inline bool cpu_has_bf16_dot() {
#if defined(PTRAIN_HALF_X86)
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

namespace detail {
// Whether the environment variable `name` (unset, "on" or "off") is not "off".
inline bool not_switched_off(const char* name) {
  const char* env = std::getenv(name);
  const std::string_view v(env ? env : "");
  check(v.empty() || v == "on" || v == "off", name, " must be 'on' or 'off', got '", v, "'");
  return v != "off";
}
}  // namespace detail

// Whether bfloat16 GEMMs and convolutions run on vdpbf16ps: the CPU has it and the environment
// variable PTRAIN_CPU_BF16 is not "off" ("off" keeps the float GEMM on widened copies, to compare
// the two; "on", the default, takes vdpbf16ps where there is one). Read at each call, so that a
// program (a test) can switch between them.
inline bool cpu_bf16_gemm_enabled() { return detail::not_switched_off("PTRAIN_CPU_BF16") && cpu_has_bf16_dot(); }

// Whether this CPU has AMX's bfloat16 tiles and Linux lets this process use them (asked once:
// arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, process-wide).
inline bool cpu_has_amx_bf16() {
#if defined(PTRAIN_HALF_X86) && defined(__linux__)
  static const bool has = [] {
    constexpr long request_permission = 0x1023, tile_data = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    return cpu_has_bf16_dot() && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
           syscall(SYS_arch_prctl, request_permission, tile_data) == 0;
  }();
  return has;
#else
  return false;
#endif
}

// Whether the bfloat16 GEMMs run on AMX tiles: cpu_bf16_gemm_enabled, the CPU has them and
// PTRAIN_CPU_AMX is not "off" ("off" keeps vdpbf16ps, to compare the two). Read at each call.
inline bool cpu_amx_enabled() {
  return detail::not_switched_off("PTRAIN_CPU_AMX") && cpu_bf16_gemm_enabled() && cpu_has_amx_bf16();
}

#if defined(PTRAIN_HALF_X86)
namespace detail {

// The target of the functions on these instructions (kernels/cpu/im2col_bf16.hpp's too).
#define PTRAIN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// The blocking: a tile of C is bf16_mr x bf16_nr; k-pairs per block, rows of A and columns of B
// packed at a time (a B panel of 128 pairs x 32 columns is 16 KB, the A block 64 KB).
inline constexpr std::int64_t bf16_mr = 8, bf16_nr = 32;
inline constexpr std::int64_t bf16_kc_pairs = 128, bf16_mc = 128, bf16_nc = 1024;

// The packed words get their own scratch slots (scratch<T> keeps separate buffers per type).
struct PackedBf16Pairs {
  std::uint32_t bits;
};
inline std::uint32_t* packed_pairs(int slot, std::int64_t words) {
  return &scratch<PackedBf16Pairs>(slot, static_cast<std::size_t>(words))->bits;
}

inline std::uint32_t bf16_bits(const bfloat16* p) {
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const void*>(p), sizeof bits);
  return bits;
}
// The pairs of kc contiguous values at src (an odd last one padded with zero) as words `stride`
// apart from dst; zeros where src is null (past an edge of the matrix).
inline void copy_pairs(const bfloat16* src, std::int64_t kc, std::uint32_t* dst, std::int64_t stride) {
  const std::int64_t pairs = (kc + 1) / 2;
  if (!src) {
    for (std::int64_t p = 0; p < pairs; ++p) dst[p * stride] = 0;
    return;
  }
  std::int64_t p = 0;
  for (; 2 * p + 1 < kc; ++p) std::memcpy(dst + p * stride, static_cast<const void*>(src + 2 * p), sizeof *dst);
  if (p < pairs) dst[p * stride] = bf16_bits(src + 2 * p);
}
inline __mmask16 lanes_below(std::int64_t count) {
  return count >= 16 ? __mmask16(0xffff) : __mmask16((1u << std::max<std::int64_t>(count, 0)) - 1u);
}

// One step of transpose_words16: the off-diagonal H x H blocks of each 2H x 2H block of 16 x 16
// words swap places, one two-source permutation per row (unrolled, the rows stay in registers).
template <int H>
PTRAIN_BF16_TARGET inline void swap_word_blocks(__m512i (&r)[16]) {
  alignas(64) static constexpr auto permutations = [] {  // rows i and i + H from the pair (i, i + H)
    std::array<std::int32_t, 32> p{};
    for (int j = 0; j < 16; ++j) {
      p[j] = (j & H) == 0 ? j : 16 + j - H;
      p[16 + j] = (j & H) == 0 ? j + H : 16 + j;
    }
    return p;
  }();
  const __m512i to_top = _mm512_load_si512(permutations.data());
  const __m512i to_bottom = _mm512_load_si512(permutations.data() + 16);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    if ((i & H) == 0) {
      const __m512i a = r[i], b = r[i + H];
      r[i] = _mm512_permutex2var_epi32(a, to_top, b);
      r[i + H] = _mm512_permutex2var_epi32(a, to_bottom, b);
    }
}
// r[j][i] = r[i][j] for 16 x 16 words: the block swaps at every scale.
PTRAIN_BF16_TARGET inline void transpose_words16(__m512i (&r)[16]) {
  swap_word_blocks<8>(r);
  swap_word_blocks<4>(r);
  swap_word_blocks<2>(r);
  swap_word_blocks<1>(r);
}

// The permutations of two registers of 32 bfloat16 (rows k and k + 1 of 32 lines) into the pair
// words of lines 0-15 ([0]) and 16-31 ([1]): word l = row k's value l | row k + 1's << 16.
alignas(64) inline constexpr std::uint16_t pair_interleave[2][32] = {
    {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46,
     15, 47},
    {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61,
     30, 62, 31, 63}};

// Packs lines [line0, line0 + count) (columns of op(B), or rows of op(A)) over k in [k0, k0 + kc)
// into panels of `width` lines: word (panel, p, l) = X(k0 + 2p, l) | X(k0 + 2p + 1, l) << 16, zero
// past the edges, where X(k, l) is src[k * ld + l] when k_major, else src[l * ld + k]. Lines whose
// pairs are adjacent (not k_major) are turned 16 lines by 16 pairs at a time (transpose_words16),
// the last odd pairs word by word.
PTRAIN_BF16_TARGET inline void pack_pairs(bool k_major, const bfloat16* src, std::int64_t ld, std::int64_t line0,
                                          std::int64_t count, std::int64_t k0, std::int64_t kc, std::int64_t width,
                                          std::uint32_t* out) {
  const std::int64_t pairs = (kc + 1) / 2;
  for (std::int64_t l0 = 0; l0 < count; l0 += width) {
    std::uint32_t* panel = out + l0 * pairs;
    const std::int64_t lines = std::min(width, count - l0);
    if (!k_major) {  // a line's pairs are adjacent already
      const std::int64_t whole = kc / 32 * 16;  // pairs in whole groups of 16
      for (std::int64_t h = 0; h < width; h += 16)
        for (std::int64_t p0 = 0; p0 < whole; p0 += 16) {
          __m512i words[16];
#pragma GCC unroll 16
          for (int i = 0; i < 16; ++i)
            words[i] = h + i < lines ? _mm512_loadu_si512(src + (line0 + l0 + h + i) * ld + k0 + 2 * p0)
                                     : _mm512_setzero_si512();
          transpose_words16(words);
          const __mmask16 m = lanes_below(width - h);
#pragma GCC unroll 16
          for (int q = 0; q < 16; ++q) _mm512_mask_storeu_epi32(panel + (p0 + q) * width + h, m, words[q]);
        }
      for (std::int64_t l = 0; l < width; ++l)
        copy_pairs(l < lines ? src + (line0 + l0 + l) * ld + k0 + 2 * whole : nullptr, kc - 2 * whole,
                   panel + whole * width + l, width);
      continue;
    }
    // Two rows of X, up to 16 lines of each, interleaved by one permutation.
    const __m512i index = _mm512_load_si512(pair_interleave[0]);
    for (std::int64_t p = 0; p < pairs; ++p) {
      const bfloat16* row0 = src + (k0 + 2 * p) * ld + line0 + l0;
      const bool second = 2 * p + 1 < kc;
      for (std::int64_t h = 0; h < width; h += 16) {
        const __mmask32 m = lanes_below(lines - h);
        const __m512i lo = _mm512_maskz_loadu_epi16(m, row0 + h);
        const __m512i hi = second ? _mm512_maskz_loadu_epi16(m, row0 + ld + h) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(panel + p * width + h, lanes_below(width - h),
                                 _mm512_permutex2var_epi16(lo, index, hi));
      }
    }
  }
}

// C[rows x cols] += alpha * (a panel of A) * (a panel of B) over `pairs` k-pairs.
PTRAIN_BF16_TARGET inline void bf16_tile(std::int64_t pairs, const std::uint32_t* a, const std::uint32_t* b, float alpha,
                                         float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols) {
  __m512 acc[bf16_mr][2];
#pragma GCC unroll 8
  for (int r = 0; r < bf16_mr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * bf16_nr);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * bf16_nr + 16);
#pragma GCC unroll 8
    for (int r = 0; r < bf16_mr; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[p * bf16_mr + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  const __mmask16 m0 = lanes_below(cols), m1 = lanes_below(cols - 16);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    _mm512_mask_storeu_ps(row, m0, _mm512_fmadd_ps(scale, acc[r][0], _mm512_maskz_loadu_ps(m0, row)));
    if (m1) _mm512_mask_storeu_ps(row + 16, m1, _mm512_fmadd_ps(scale, acc[r][1], _mm512_maskz_loadu_ps(m1, row + 16)));
  }
}

#define PTRAIN_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

// Tiles 0-3 hold a 32 x 32 block of C (16 x 16 floats each), 4-5 its 32 rows of A over `pairs`
// pairs (16 rows of words each), 6-7 a B panel's two halves over them (`pairs` rows of 16 words).
PTRAIN_AMX_TARGET inline void amx_configure(std::int64_t pairs) {
  struct alignas(64) {
    std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
    std::uint16_t bytes_per_row[16] = {};
    std::uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = static_cast<std::uint16_t>(t == 4 || t == 5 ? 4 * pairs : 64);
    config.rows[t] = static_cast<std::uint8_t>(t == 6 || t == 7 ? pairs : 16);
  }
  _tile_loadconfig(&config);
}

// C[16 * RowTiles x 32] (rows ldc apart) += A's 16 * RowTiles packed rows (lda words apart) x a B
// panel of 32 columns, over pairs [p0, p1) in steps of `step` (the pairs amx_configure was given).
// One tile of rows serves a matrix of 16 rows or fewer (UNet's 16-channel layers) at no cost for
// the second.
template <int RowTiles>
PTRAIN_AMX_TARGET inline void amx_block(std::int64_t p0, std::int64_t p1, std::int64_t step, const std::uint32_t* a,
                                        std::int64_t lda, const std::uint32_t* b, float* c, std::int64_t ldc) {
  static_assert(RowTiles == 1 || RowTiles == 2);
  const std::int64_t c_stride = ldc * 4, a_stride = lda * 4, b_stride = bf16_nr * 4;
  _tile_loadd(0, c, c_stride);
  _tile_loadd(1, c + 16, c_stride);
  if constexpr (RowTiles == 2) {
    _tile_loadd(2, c + 16 * ldc, c_stride);
    _tile_loadd(3, c + 16 * ldc + 16, c_stride);
  }
  for (std::int64_t p = p0; p < p1; p += step) {
    _tile_loadd(4, a + p, a_stride);
    if constexpr (RowTiles == 2) _tile_loadd(5, a + 16 * lda + p, a_stride);
    _tile_loadd(6, b + p * bf16_nr, b_stride);
    _tile_loadd(7, b + p * bf16_nr + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (RowTiles == 2) {
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, c_stride);
  _tile_stored(1, c + 16, c_stride);
  if constexpr (RowTiles == 2) {
    _tile_stored(2, c + 16 * ldc, c_stride);
    _tile_stored(3, c + 16 * ldc + 16, c_stride);
  }
}

// Rows [row0, row0 + count) of op(A) over k in [k0, k0 + kc), one row of pair words each, rows ld
// words apart; rows up to the next multiple of 32 zero. A transposed A (its rows are op(A)'s
// columns) is packed 16 rows at a time as pack_pairs packs B, pairs by lines, and turned 16 x 16
// words at a time.
PTRAIN_AMX_TARGET inline void amx_pack_a(bool trans_a, const bfloat16* a, std::int64_t lda, std::int64_t row0,
                                         std::int64_t count, std::int64_t k0, std::int64_t kc, std::int64_t ld,
                                         std::uint32_t* out) {
  if (trans_a) {
    const std::int64_t pairs = (kc + 1) / 2;
    alignas(64) std::uint32_t by_pair[bf16_kc_pairs * 16];
    for (std::int64_t i0 = 0; i0 < count; i0 += 16) {
      const std::int64_t lines = std::min<std::int64_t>(16, count - i0);
      pack_pairs(true, a, lda, row0 + i0, lines, k0, kc, 16, by_pair);
      for (std::int64_t p0 = 0; p0 < pairs; p0 += 16) {
        const std::int64_t rest = std::min<std::int64_t>(16, pairs - p0);
        __m512i words[16];
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q)
          words[q] = q < rest ? _mm512_load_si512(by_pair + (p0 + q) * 16) : _mm512_setzero_si512();
        transpose_words16(words);
        for (std::int64_t l = 0; l < lines; ++l)
          _mm512_mask_storeu_epi32(out + (i0 + l) * ld + p0, lanes_below(rest), words[l]);
      }
    }
  } else {
    for (std::int64_t i = 0; i < count; ++i) {  // the row's pairs are adjacent already
      std::uint32_t* row = out + i * ld;
      std::memcpy(row, a + (row0 + i) * lda + k0, static_cast<std::size_t>(kc) * sizeof(bfloat16));
      if (kc % 2) row[kc / 2] &= 0xffffu;
    }
  }
  std::fill(out + count * ld, out + (count + 31) / 32 * 32 * ld, 0u);
}

// gemm_bf16_packing's product (alpha 1, C already scaled by beta) on AMX tiles. A k-block's
// pairs run 16 a step, then the rest (fewer than 16) under a second tile configuration; blocks of
// C at the edges go through a 32 x 32 copy, those of 16 rows or fewer on one tile of rows.
template <class PackB>
PTRAIN_AMX_TARGET void gemm_amx_packing(bool trans_a, std::int64_t m, std::int64_t n, std::int64_t k,
                                        const bfloat16* a, std::int64_t lda, PackB&& pack_b, float* c,
                                        std::int64_t ldc) {
  static_assert(bf16_mc % 32 == 0 && bf16_nr == 32, "blocks of 32 x 32");
  const std::int64_t kc_max = 2 * bf16_kc_pairs;
  std::uint32_t* packed_b = packed_pairs(0, bf16_kc_pairs * bf16_nc);
  std::uint32_t* packed_a = packed_pairs(1, bf16_kc_pairs * bf16_mc);
  alignas(64) float edge[32 * 32];
  for (std::int64_t jc = 0; jc < n; jc += bf16_nc) {
    const std::int64_t nc = std::min(bf16_nc, n - jc);
    for (std::int64_t pc = 0; pc < k; pc += kc_max) {
      const std::int64_t kc = std::min(kc_max, k - pc), pairs = (kc + 1) / 2, whole = pairs / 16 * 16;
      pack_b(jc, nc, pc, kc, packed_b);
      for (std::int64_t ic = 0; ic < m; ic += bf16_mc) {
        const std::int64_t mc = std::min(bf16_mc, m - ic);
        amx_pack_a(trans_a, a, lda, ic, mc, pc, kc, bf16_kc_pairs, packed_a);
        for (const auto& [p0, p1] : {std::pair{std::int64_t{0}, whole}, std::pair{whole, pairs}}) {
          if (p1 == p0) continue;
          const std::int64_t step = std::min<std::int64_t>(16, p1 - p0);
          amx_configure(step);
          for (std::int64_t jr = 0; jr < nc; jr += bf16_nr)
            for (std::int64_t ir = 0; ir < mc; ir += 32) {
              const std::int64_t rows = std::min<std::int64_t>(32, mc - ir), cols = std::min(bf16_nr, nc - jr);
              float* block = c + (ic + ir) * ldc + jc + jr;
              const std::uint32_t *a_rows = packed_a + ir * bf16_kc_pairs, *panel = packed_b + jr * pairs;
              const auto run = [&](float* at, std::int64_t ld) {
                if (rows > 16) amx_block<2>(p0, p1, step, a_rows, bf16_kc_pairs, panel, at, ld);
                else amx_block<1>(p0, p1, step, a_rows, bf16_kc_pairs, panel, at, ld);
              };
              if ((rows == 32 || rows == 16) && cols == 32) {
                run(block, ldc);
                continue;
              }
              std::fill(edge, edge + 32 * 32, 0.0f);
              for (std::int64_t r = 0; r < rows; ++r) std::copy(block + r * ldc, block + r * ldc + cols, edge + r * 32);
              run(edge, 32);
              for (std::int64_t r = 0; r < rows; ++r) std::copy(edge + r * 32, edge + r * 32 + cols, block + r * ldc);
            }
        }
      }
    }
  }
  _tile_release();
}

// C = alpha * op(A) * B + beta * C on the calling thread, B given by its packer:
// pack_b(jc, nc, pc, kc, out) writes columns [jc, jc + nc) of B over k in [pc, pc + kc) as
// pack_pairs writes them (panels of bf16_nr columns; kernels/cpu/im2col_bf16.hpp packs a
// convolution's columns straight from the image).
template <class PackB>
PTRAIN_BF16_TARGET void gemm_bf16_packing(bool trans_a, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                                          const bfloat16* a, std::int64_t lda, PackB&& pack_b, float beta, float* c,
                                          std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (beta != 1.0f)
    for (std::int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.0f) std::fill(row, row + n, 0.0f);  // as BLAS: C is not read
      else for (std::int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  if (k == 0 || alpha == 0.0f) return;
  if (alpha == 1.0f && cpu_amx_enabled()) {
    gemm_amx_packing(trans_a, m, n, k, a, lda, pack_b, c, ldc);
    return;
  }
  const std::int64_t kc_max = 2 * bf16_kc_pairs;
  std::uint32_t* packed_b = packed_pairs(0, bf16_kc_pairs * bf16_nc);
  std::uint32_t* packed_a = packed_pairs(1, bf16_kc_pairs * bf16_mc);
  for (std::int64_t jc = 0; jc < n; jc += bf16_nc) {
    const std::int64_t nc = std::min(bf16_nc, n - jc);
    for (std::int64_t pc = 0; pc < k; pc += kc_max) {
      const std::int64_t kc = std::min(kc_max, k - pc), pairs = (kc + 1) / 2;
      pack_b(jc, nc, pc, kc, packed_b);
      for (std::int64_t ic = 0; ic < m; ic += bf16_mc) {
        const std::int64_t mc = std::min(bf16_mc, m - ic);
        pack_pairs(trans_a, a, lda, ic, mc, pc, kc, bf16_mr, packed_a);
        for (std::int64_t jr = 0; jr < nc; jr += bf16_nr)
          for (std::int64_t ir = 0; ir < mc; ir += bf16_mr)
            bf16_tile(pairs, packed_a + ir * pairs, packed_b + jr * pairs, alpha, c + (ic + ir) * ldc + jc + jr, ldc,
                      std::min(bf16_mr, mc - ir), std::min(bf16_nr, nc - jr));
      }
    }
  }
}

// The product on the calling thread (callers check cpu_bf16_gemm_enabled first).
PTRAIN_BF16_TARGET inline void gemm_bf16_serial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                                                std::int64_t k, float alpha, const bfloat16* a, std::int64_t lda,
                                                const bfloat16* b, std::int64_t ldb, float beta, float* c,
                                                std::int64_t ldc) {
  gemm_bf16_packing(trans_a, m, n, k, alpha, a, lda,
                    [&](std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc, std::uint32_t* out) {
                      pack_pairs(!trans_b, b, ldb, jc, nc, pc, kc, bf16_nr, out);
                    },
                    beta, c, ldc);
}


}  // namespace detail
#endif

}  // namespace ptrain::kernels
