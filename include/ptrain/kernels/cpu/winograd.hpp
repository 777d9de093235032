#pragma once
// Winograd convolution F(m x m, 3 x 3) on the CPU (Lavin & Gray, 2015) for 3x3, stride-1,
// undilated, ungrouped layers, any padding; m = 2 or 4 (alpha = m + 2 input rows per tile).
//
// Per output tile of m x m and per channel pair: Y = A^T [(G g G^T) (.) (B^T d B)] A, where d is
// the alpha x alpha input tile. Summed over input channels, the (.) at each of the alpha^2
// transform positions is one GEMM: (tiles x Cin) x (Cin x Cout). So a chunk of tiles is
// transformed into V[pos][tile][c], multiplied by the transformed filters U[pos][c][k] into
// M[pos][tile][k], and M transformed back into the output. Tiles that overhang the output
// (H, W not multiples of m) read zeros past the input and write only their valid part.
// - grad input: the same algorithm on the gradient, with the filter flipped in space and its
//   channels swapped, padded by 2 - pad (the stride-1 transposed convolution, conv.hpp).
// - grad weight: by linearity dL/dg = G^T [sum over tiles (A dY A^T) (.) (B^T d B)] G, one
//   (Cout x tiles) x (tiles x Cin) GEMM per position, summed over chunks and threads.
// Each thread takes a contiguous run of chunks, its GEMMs single-threaded (kernels::gemm stays on
// its thread inside a parallel region); where the batch has few tiles and the layer many channels
// (split_positions), the whole batch is transformed and the threads split the positions instead.
// The products run on gemm_avx512.hpp's register tiles in AVX-512 builds (float), on kernels::gemm
// otherwise. The transforms run over `lanes` channels at once (the lanes of one SIMD register for
// float), so that they vectorise and write V and M contiguously.
// F(4x4) does 4x fewer multiplies than direct convolution where F(2x2) does 2.25x, at the price of
// a larger float error (its transforms hold 1/6, 1/24 and 8; see test/kernels/winograd_test), too
// large on a real network's gradients for the default (conv_algorithm.hpp): it runs only on request.
// Per-thread scratch: slot 0 V, slot 1 M, slot 2 grad-weight partial sums (split_positions: the
// calling thread's hold the whole batch's); the calling thread's slot 3 holds U.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/device/threads.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"
#include "ptrain/kernels/cpu/gemm_avx512.hpp"
#include "ptrain/kernels/cpu/gemm_bf16.hpp"
#include "ptrain/kernels/cpu/lanes.hpp"
#include "ptrain/kernels/cpu/scratch.hpp"
#include "ptrain/kernels/geometry/conv.hpp"

namespace ptrain::kernels {

// The transform matrices of F(m x m, 3 x 3) for cross-correlation (Lavin & Gray's, points
// 0, +-1 for m = 2 and 0, +-1, +-2 for m = 4).
template <int M>
struct WinogradTransforms;
template <>
struct WinogradTransforms<2> {
  static constexpr int alpha = 4;
  static constexpr double BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static constexpr double AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
template <>
struct WinogradTransforms<4> {
  static constexpr int alpha = 6;
  static constexpr double BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                      {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
  static constexpr double AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// Which layers it computes: 3x3, stride 1, dilation 1, one group (the gradient of the input
// also needs pad <= 2, so that the transposed convolution's padding 2 - pad is not negative, and
// an output channel to run on).
inline bool winograd_applies(const Conv2dGeometry& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
         g.dilation_w == 1 && g.groups == 1 && g.in_channels > 0;
}
inline bool winograd_grad_input_applies(const Conv2dGeometry& g) {
  return winograd_applies(g) && g.out_channels > 0 && g.pad_h <= 2 && g.pad_w <= 2;
}

namespace detail::winograd {

// C = op(A) B, or C += op(A) B with `accumulate` (row-major, n columns): a position's product, on
// AVX-512 register tiles where the build has them and n fits them (gemm_avx512.hpp), else on
// kernels::gemm (OpenBLAS).
template <class T>
void product(bool trans_a, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b,
             std::int64_t ldb, T* c, std::int64_t ldc, bool accumulate) {
#if defined(__AVX512F__) && !defined(__CUDACC__)
  if constexpr (std::is_same_v<T, float>)
    if (n % detail::avx512::width == 0) return gemm_avx512(trans_a, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
#endif
  gemm<T>(trans_a, false, m, n, k, T(1), a, lda, b, ldb, accumulate ? T(1) : T(0), c, ldc);
}
// The same with V and U in bfloat16 and M in float, on vdpbf16ps (callers check
// cpu_bf16_gemm_enabled, false where the build has no x86 bfloat16 kernels).
inline void product(bool trans_a, std::int64_t m, std::int64_t n, std::int64_t k, const bfloat16* a, std::int64_t lda,
                    const bfloat16* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate) {
#if defined(PTRAIN_HALF_X86)
  gemm_bf16_serial(trans_a, false, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
#else
  (void)trans_a, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc, (void)accumulate;
  fail("winograd: bfloat16 products need vdpbf16ps (cpu_bf16_gemm_enabled)");
#endif
}

// A matrix's entries as a function of constant indices: Mat<&T::BT> or its transpose.
template <int R, int K, const double (*Entries)[K], bool Transposed = false>
struct Mat {
  static constexpr int rows = Transposed ? K : R, cols = Transposed ? R : K;
  static constexpr double at(int i, int k) { return Transposed ? Entries[k][i] : Entries[i][k]; }
};

// acc += E * x, E a matrix entry known at compile time: zeros cost nothing and +-1 are adds.
template <double E, class T, class V>
inline void multiply_add(V& acc, const V& x) {
  if constexpr (E == 1.0) acc += x;
  else if constexpr (E == -1.0) acc -= x;
  else if constexpr (E != 0.0) acc += static_cast<T>(E) * x;
}

// out[i][c] = sum_k Mx(i, k) in[k][c]: Mx on the left; V is T or a vector of T.
template <class Mx, class T, int C, class V>
inline void left(const V (&in)[Mx::cols][C], V (&out)[Mx::rows][C]) {
  unroll<Mx::rows>([&](auto i) {
    for (int c = 0; c < C; ++c) {
      V acc{};
      unroll<Mx::cols>([&](auto k) { multiply_add<Mx::at(decltype(i)::value, decltype(k)::value), T>(acc, in[k][c]); });
      out[i][c] = acc;
    }
  });
}
// out[r][i] = sum_k in[r][k] Mx(i, k): Mx^T on the right.
template <class Mx, class T, int R, class V>
inline void right(const V (&in)[R][Mx::cols], V (&out)[R][Mx::rows]) {
  for (int r = 0; r < R; ++r)
    unroll<Mx::rows>([&](auto i) {
      V acc{};
      unroll<Mx::cols>([&](auto k) { multiply_add<Mx::at(decltype(i)::value, decltype(k)::value), T>(acc, in[r][k]); });
      out[r][i] = acc;
    });
}
// Mx X Mx^T.
template <class Mx, class T, class V>
inline void sandwich(const V (&in)[Mx::cols][Mx::cols], V (&out)[Mx::rows][Mx::rows]) {
  V half_way[Mx::rows][Mx::cols];
  left<Mx, T>(in, half_way);
  right<Mx, T>(half_way, out);
}

template <int M>
struct Tiles {
  using W = WinogradTransforms<M>;
  static constexpr int alpha = W::alpha, positions = alpha * alpha;
  using BT = Mat<alpha, alpha, W::BT>;
  using G = Mat<alpha, 3, W::G>;
  using GT = Mat<alpha, 3, W::G, true>;
  using AT = Mat<M, alpha, W::AT>;
  using A = Mat<M, alpha, W::AT, true>;
};

// Channels transformed at once: a SIMD register of T (lanes.hpp).
using lanes::lanes;
using lanes::Lanes;
using lanes::load_lanes;

// Where a geometry's tiles are and how they are cut into chunks (one GEMM per position each).
struct TileGrid {
  std::int64_t tiles_h, tiles_w, per_image, total, chunk, chunks;
};
// elements_per_tile: of the per-chunk buffers per tile (alpha^2 (Cin + Cout)); a chunk's buffers
// stay within 2^19 elements (2 MB of float: the 1 MB L2 of a core here and its part of L3; 2^18
// and 2^20 ran the 64- and 128-channel layers of ResNet-18 and VGG-16 3-5% slower) and its GEMMs
// get at least 32 rows where the batch allows, and every thread gets a chunk.
inline TileGrid tile_grid(const Conv2dGeometry& g, int m, std::int64_t elements_per_tile, int threads) {
  TileGrid t{};
  t.tiles_h = (g.out_h + m - 1) / m;
  t.tiles_w = (g.out_w + m - 1) / m;
  t.per_image = t.tiles_h * t.tiles_w;
  t.total = g.batch * t.per_image;
  constexpr std::int64_t budget = std::int64_t{1} << 19;
  const std::int64_t fair = (t.total + threads - 1) / threads;
  t.chunk = std::clamp<std::int64_t>(budget / std::max<std::int64_t>(1, elements_per_tile), 32, 512);
  t.chunk = std::max<std::int64_t>(1, std::min(t.chunk, fair));
  t.chunks = (t.total + t.chunk - 1) / t.chunk;
  return t;
}

inline int threads_for(std::int64_t chunks) {
  return static_cast<int>(std::clamp<std::int64_t>(chunks, 1, num_threads()));
}

// Runs body(first_chunk, last_chunk, thread) on a team splitting [0, chunks).
template <class Body>
void over_chunks(std::int64_t chunks, int threads, Body&& body) {
  if (threads <= 1) {
    body(std::int64_t{0}, chunks, 0);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t t = thread_index(), team = team_size();
    body(chunks * t / team, chunks * (t + 1) / team, static_cast<int>(t));
  }
}

// to[l] = v[l] for l < channels, in O: T itself, or bfloat16 for float lanes (rounded once).
template <class T, class O>
inline void store_lanes(const Lanes<T>& v, int channels, O* to) {
  if constexpr (std::is_same_v<O, T>) {
    if (channels == lanes<T>) {
      std::memcpy(to, &v, sizeof(Lanes<T>));
    } else {
      alignas(64) T values[lanes<T>];
      std::memcpy(values, &v, sizeof(values));
      std::copy(values, values + channels, to);
    }
  } else {
    static_assert(std::is_same_v<T, float> && std::is_same_v<O, bfloat16>);
#if defined(__CUDACC__)
    *to = static_cast<O>(v);
#else
    const lanes::LaneHalves bits = lanes::bfloat16_bits(v);
    if (channels == lanes<T>) std::memcpy(static_cast<void*>(to), &bits, sizeof(bits));
    else std::memcpy(static_cast<void*>(to), &bits, static_cast<std::size_t>(channels) * sizeof(O));
#endif
  }
}

// Writes (to[p * stride + l] = from[p][l] for l < channels) the positions of a transformed tile;
// an O other than T (bfloat16 operands of float transforms) rounded once.
template <int N, class T, class O>
inline void scatter(const Lanes<T> (&from)[N][N], int channels, std::int64_t stride, O* to) {
  for (int p = 0; p < N * N; ++p) store_lanes<T>(from[p / N][p % N], channels, to + p * stride);
}

#if !defined(__CUDACC__)
typedef float Floats8 __attribute__((vector_size(32)));

// columns[j][r] = rows[r][j] for 8 x 8 floats, in three rounds of shuffles.
__attribute__((always_inline)) inline void transpose8(const Floats8 (&rows)[8], Floats8 (&columns)[8]) {
  Floats8 t[8], u[8];
  for (int a = 0; a < 8; a += 2) {  // t[a], t[a + 1]: rows a and a + 1 interleaved
    t[a] = __builtin_shufflevector(rows[a], rows[a + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[a + 1] = __builtin_shufflevector(rows[a], rows[a + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int a = 0; a < 8; a += 4)  // u: four rows of a column in each half
    for (int h = 0; h < 2; ++h) {
      u[a + 2 * h] = __builtin_shufflevector(t[a + h], t[a + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[a + 2 * h + 1] = __builtin_shufflevector(t[a + h], t[a + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int j = 0; j < 4; ++j) {  // the halves of rows 0-3 and 4-7 joined
    columns[j] = __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    columns[j + 4] = __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// 8 values from `from` on as floats (bfloat16 widened exactly).
__attribute__((always_inline)) inline Floats8 load8(const float* from) {
  Floats8 v;
  std::memcpy(&v, from, sizeof v);
  return v;
}
__attribute__((always_inline)) inline Floats8 load8(const bfloat16* from) {
  typedef std::uint16_t Halves8 __attribute__((vector_size(16)));
  typedef std::uint32_t Words8 __attribute__((vector_size(32)));
  Halves8 bits;
  std::memcpy(&bits, static_cast<const void*>(from), sizeof bits);
  const Words8 words = __builtin_convertvector(bits, Words8) << 16;
  Floats8 v;
  std::memcpy(&v, &words, sizeof v);
  return v;
}

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#define PTRAIN_WINOGRAD_MASKED_ROWS 1
// The values of `from`'s 8 at the bits of `valid` as floats (bfloat16 widened exactly), zero at
// the others, which are not read (a masked load: they may lie outside the tensor).
__attribute__((always_inline)) inline Floats8 load8(const float* from, __mmask8 valid) {
  return reinterpret_cast<Floats8>(_mm256_maskz_loadu_ps(valid, from));
}
__attribute__((always_inline)) inline Floats8 load8(const bfloat16* from, __mmask8 valid) {
  const __m128i bits = _mm_maskz_loadu_epi16(valid, from);
  return reinterpret_cast<Floats8>(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
// The 9 taps of the 3x3 filter at f as floats in a register's first lanes (bfloat16 widened
// exactly), the others zero and not read.
inline __m512i filter_taps(const float* f) { return _mm512_castps_si512(_mm512_maskz_loadu_ps(0x1ff, f)); }
inline __m512i filter_taps(const bfloat16* f) {
  return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(0x1ff, f)), 16);
}
#endif

// gather() of a whole tile of lanes<float> channels, 8 channels' rows at once turned into the
// tile's columns by transpose8: rows [i0, i1) of the tile read by load(address of the row's first
// column), the others zero.
template <int N, class S, class Load>
__attribute__((always_inline)) inline void gather_rows_transposed(const S* plane, std::int64_t stride,
                                                                  std::int64_t W, std::int64_t y0, std::int64_t x0,
                                                                  std::int64_t i0, std::int64_t i1, Load&& load,
                                                                  Lanes<float> (&d)[N][N]) {
  constexpr int blocks = lanes<float> / 8;
  static_assert(N <= 8 && blocks * 8 == lanes<float> && (blocks == 1 || blocks == 2));
  for (int i = 0; i < N; ++i) {
    if (i < i0 || i >= i1) {
      for (int j = 0; j < N; ++j) d[i][j] = Lanes<float>{};
      continue;
    }
    // The row's address as an integer: where the tile begins left of the plane, it lies before it.
    const std::uintptr_t row =
        reinterpret_cast<std::uintptr_t>(plane + (y0 + i) * W) + static_cast<std::uintptr_t>(x0 * std::int64_t{sizeof(S)});
    Floats8 columns[blocks][8];
    for (int b = 0; b < blocks; ++b) {
      Floats8 rows[8];
      for (int r = 0; r < 8; ++r)
        rows[r] = load(reinterpret_cast<const S*>(row + static_cast<std::uintptr_t>((b * 8 + r) * stride * std::int64_t{sizeof(S)})));
      transpose8(rows, columns[b]);
    }
    for (int j = 0; j < N; ++j) {
      if constexpr (blocks == 1)
        d[i][j] = columns[0][j];
      else
        d[i][j] = __builtin_shufflevector(columns[0][j], columns[1][j], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                          14, 15);
    }
  }
}
#endif

// in[i][j][l] = tap (i, j) of the 3x3 filter at f + l * column_step (turned by 180 degrees with
// `flip`) for lanes l < columns, zero for the others; filters in W (T, or bfloat16 for float:
// widened exactly).
template <class T, class W>
inline void read_taps(const W* f, std::int64_t column_step, int columns, bool flip, Lanes<T> (&in)[3][3]) {
#if defined(PTRAIN_WINOGRAD_MASKED_ROWS)
  if constexpr (std::is_same_v<T, float>) {  // each lane's 9 taps one masked load, then a transpose
    __m512i taps[16];
    for (int l = 0; l < 16; ++l) taps[l] = l < columns ? filter_taps(f + l * column_step) : _mm512_setzero_si512();
    transpose_words16(taps);
    for (int tap = 0; tap < 9; ++tap) in[tap / 3][tap % 3] = reinterpret_cast<Lanes<float>>(taps[flip ? 8 - tap : tap]);
    return;
  }
#endif
  alignas(64) T taps[3][3][lanes<T>] = {};
  for (int l = 0; l < columns; ++l)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        taps[i][j][l] = static_cast<T>(flip ? f[l * column_step + (2 - i) * 3 + (2 - j)] : f[l * column_step + i * 3 + j]);
  std::memcpy(&in[0][0], &taps[0][0][0], sizeof(in));
}

// U[pos][c][k] = (G w[k][c] G^T)[pos]; with `flip`, of the weight of the transposed convolution
// (channels swapped, the kernel turned by 180 degrees: the filter of the input's gradient).
// The weight is [K, C, 3, 3] in W (read_taps'); flipped, U is [pos][K][C]. Lanes run along U's
// columns. U in O (bfloat16 for products on vdpbf16ps), transformed in T.
template <int M, class T, class O = T, class W = T>
void transform_filters(const Conv2dGeometry& g, const W* w, bool flip, O* U) {
  using Tl = Tiles<M>;
  constexpr int L = lanes<T>;
  const std::int64_t K = g.out_channels, C = g.in_channels, KC = K * C;
  const std::int64_t rows = flip ? K : C, cols = flip ? C : K;  // U[pos] is rows x cols
  const std::int64_t column_step = flip ? 9 : C * 9;             // between the filters of adjacent columns
  const int threads = threads_for(rows * cols >= 4096 ? rows : 1);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t s0 = 0; s0 < cols; s0 += L) {
      const int columns = static_cast<int>(std::min<std::int64_t>(L, cols - s0));
      const W* f = w + (flip ? r * C + s0 : s0 * C + r) * 9;
      Lanes<T> in[3][3], out[Tl::alpha][Tl::alpha];
      read_taps<T>(f, column_step, columns, flip, in);
      sandwich<typename Tl::G, T>(in, out);
      scatter<Tl::alpha, T>(out, columns, KC, U + r * cols + s0);
    }
}

// The N x N tile at row y0, column x0 of `channels` (<= lanes: the rest zero) planes of H x W,
// from `plane` on, planes `stride` apart, zero outside the planes; planes of S (T, or bfloat16
// for float lanes: widened here, exactly).
template <int N, class T, class S>
inline void gather(const S* plane, std::int64_t stride, int channels, std::int64_t H, std::int64_t W, std::int64_t y0,
                   std::int64_t x0, Lanes<T> (&d)[N][N]) {
  constexpr int L = lanes<T>;
  alignas(64) T buffer[N][N][L];
  const std::int64_t i0 = std::max<std::int64_t>(0, -y0), i1 = std::min<std::int64_t>(N, H - y0);
  const std::int64_t j0 = std::max<std::int64_t>(0, -x0), j1 = std::min<std::int64_t>(N, W - x0);
#if defined(PTRAIN_WINOGRAD_MASKED_ROWS)
  // Any tile, the padding's zeros and all: the columns [j0, j1) of each row a masked load.
  if constexpr (std::is_same_v<T, float>)
    if (channels == L && j0 < j1) {
      const auto valid = static_cast<__mmask8>(((1u << j1) - 1) & ~((1u << j0) - 1));
      gather_rows_transposed<N>(plane, stride, W, y0, x0, i0, i1, [valid](const S* row) { return load8(row, valid); },
                                d);
      return;
    }
#endif
  if (y0 >= 0 && x0 >= 0 && y0 + N <= H && x0 + N <= W && channels == L) {
#if !defined(__CUDACC__)
    if constexpr (std::is_same_v<T, float>)
      if (x0 + 8 <= W) {
        gather_rows_transposed<N>(plane, stride, W, y0, x0, 0, N, [](const S* row) { return load8(row); }, d);
        return;
      }
#endif
    for (int l = 0; l < L; ++l) {
      const S* src = plane + l * stride + y0 * W + x0;
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) buffer[i][j][l] = static_cast<T>(src[i * W + j]);
    }
  } else {
    // Every element written once (a fill first, then the values, costs more than these tests).
    for (int l = 0; l < L; ++l) {
      const S* src = plane + l * stride + y0 * W + x0;
      for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t j = 0; j < N; ++j)
          buffer[i][j][l] =
              l < channels && i >= i0 && i < i1 && j >= j0 && j < j1 ? static_cast<T>(src[i * W + j]) : T(0);
    }
  }
  std::memcpy(&d[0][0], &buffer[0][0][0], sizeof(d));
}

// out[pos * stride + (tile - first) * C + c] = (Mx d Mx^T)[pos] for tiles [first, first + count)
// of the grid, d the N x N tile (N = Mx::cols) of planes [batch, C, H, W] whose corner is the output
// tile's shifted back by the padding (zero outside the planes); planes in S (gather's), out in O,
// computed in T.
template <int M, class Mx, class T, class S, class O>
void transform_tiles(const TileGrid& grid, const S* planes, std::int64_t C, std::int64_t H, std::int64_t W,
                     std::int64_t pad_h, std::int64_t pad_w, std::int64_t first, std::int64_t count, O* out,
                     std::int64_t stride) {
  constexpr int N = Mx::cols, P = Mx::rows;
  const std::int64_t plane = H * W;
  for (std::int64_t t = 0; t < count; ++t) {
    const std::int64_t tile = first + t, n = tile / grid.per_image, in_image = tile % grid.per_image;
    const std::int64_t y0 = in_image / grid.tiles_w * M - pad_h, x0 = in_image % grid.tiles_w * M - pad_w;
    for (std::int64_t c0 = 0; c0 < C; c0 += lanes<T>) {
      const int channels = static_cast<int>(std::min<std::int64_t>(lanes<T>, C - c0));
      Lanes<T> d[N][N], v[P][P];
      gather<N, T>(planes + (n * C + c0) * plane, plane, channels, H, W, y0, x0, d);
      sandwich<Mx, T>(d, v);
      scatter<P, T>(v, channels, stride, out + t * C + c0);
    }
  }
}

// V[pos * stride + (tile - first) * C + c] = (B^T d B)[pos], d the alpha x alpha input tile of
// x [N, C, H, W] (in S: T, or bfloat16 for float); stride count * C (the default) packs the
// chunk's positions one after another.
template <int M, class T, class S, class O>
void transform_inputs(const Conv2dGeometry& g, const TileGrid& grid, const S* x, std::int64_t first,
                      std::int64_t count, O* V, std::int64_t stride = 0) {
  transform_tiles<M, typename Tiles<M>::BT, T>(grid, x, g.in_channels, g.in_h, g.in_w, g.pad_h, g.pad_w, first, count,
                                            V, stride ? stride : count * g.in_channels);
}

// y[n][k] tile = A^T M[.][tile][k] A (+ b[k]) for the chunk's tiles, only its part inside the
// output; M[pos][tile - first][k] at Mt[pos * stride + (tile - first) * K + k] (stride as
// transform_inputs'). y in Out, each value rounded once after the bias is added.
template <int M, class T, class Out = T>
void transform_outputs(const Conv2dGeometry& g, const TileGrid& grid, const T* Mt, std::int64_t first,
                       std::int64_t count, const T* b, Out* y, std::int64_t stride = 0) {
  using Tl = Tiles<M>;
  const std::int64_t K = g.out_channels, OH = g.out_h, OW = g.out_w, plane = OH * OW;
  if (!stride) stride = count * K;
  for (std::int64_t t = 0; t < count; ++t) {
    const std::int64_t tile = first + t, n = tile / grid.per_image, in_image = tile % grid.per_image;
    const std::int64_t y0 = in_image / grid.tiles_w * M, x0 = in_image % grid.tiles_w * M;
    const int rows = static_cast<int>(std::min<std::int64_t>(M, OH - y0)), cols = static_cast<int>(std::min<std::int64_t>(M, OW - x0));
    for (std::int64_t k0 = 0; k0 < K; k0 += lanes<T>) {
      constexpr int L = lanes<T>;
      const int channels = static_cast<int>(std::min<std::int64_t>(L, K - k0));
      Lanes<T> m[Tl::alpha][Tl::alpha], out[M][M];
      const T* src = Mt + t * K + k0;
      for (int p = 0; p < Tl::positions; ++p) m[p / Tl::alpha][p % Tl::alpha] = load_lanes(src + p * stride, channels);
      sandwich<typename Tl::AT, T>(m, out);
      const Lanes<T> bias = b ? load_lanes(b + k0, channels) : Lanes<T>{};
      alignas(64) Out values[M][M][L];
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < M; ++j) store_lanes<T>(out[i][j] + bias, L, values[i][j]);
      for (int l = 0; l < channels; ++l) {
        Out* dst = y + (n * K + k0 + l) * plane + y0 * OW + x0;
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < cols; ++j) dst[i * OW + j] = values[i][j][l];
      }
    }
  }
}

// dM[pos * stride + (tile - first) * K + k] = (A dY A^T)[pos], dY the m x m tile of gy (zero past
// the output); stride as transform_inputs'. gy in S and dM in O, as transform_inputs' x and V.
template <int M, class T, class S, class O>
void transform_output_gradients(const Conv2dGeometry& g, const TileGrid& grid, const S* gy, std::int64_t first,
                                std::int64_t count, O* dM, std::int64_t stride = 0) {
  transform_tiles<M, typename Tiles<M>::A, T>(grid, gy, g.out_channels, g.out_h, g.out_w, 0, 0, first, count, dM,
                                           stride ? stride : count * g.out_channels);
}

// Whether the threads should split the positions rather than the tiles: where the batch's
// transformed tiles take no more room than a transformed filter per thread (few tiles, many
// channels: ResNet's last layers), every chunk of tiles would go through all of U (or, for the
// weight's gradient, add into a partial sum of its size) for little work.
inline bool split_positions(const TileGrid& grid, std::int64_t C, std::int64_t K, int threads) {
  return threads > 1 && grid.total * (C + K) <= threads * C * K;
}

// y = conv(x, w) + b given U (transform_filters): chunks of tiles over the threads, each chunk's
// positions one GEMM each; or, where split_positions, the whole batch transformed by the threads
// and then the positions, each one GEMM over every tile, split over them. V and U in Op (bfloat16:
// the products on vdpbf16ps), the transforms and M in T, y in Out, x in In (T, or bfloat16 for
// float: widened as its tiles are gathered).
template <int M, class T, class Op, class Out, class In>
void forward_transformed(const Conv2dGeometry& g, const In* x, const Op* U, const T* b, Out* y) {
  using Tl = Tiles<M>;
  const std::int64_t C = g.in_channels, K = g.out_channels;
  const TileGrid grid = tile_grid(g, M, Tl::positions * (C + K), num_threads());
  const int threads = threads_for(grid.chunks);
  if (split_positions(grid, C, K, threads)) {
    const std::int64_t total = grid.total;
    Op* V = scratch<Op>(0, static_cast<std::size_t>(Tl::positions * total * C));
    T* Mt = scratch<T>(1, static_cast<std::size_t>(Tl::positions * total * K));
    over_chunks(grid.chunks, threads, [&](std::int64_t first_chunk, std::int64_t last_chunk, int) {
      const std::int64_t first = first_chunk * grid.chunk, last = std::min(total, last_chunk * grid.chunk);
      transform_inputs<M, T>(g, grid, x, first, last - first, V + first * C, total * C);
    });
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int p = 0; p < Tl::positions; ++p)
      product(false, total, K, C, V + p * total * C, C, U + p * C * K, K, Mt + p * total * K, K, false);
    over_chunks(grid.chunks, threads, [&](std::int64_t first_chunk, std::int64_t last_chunk, int) {
      const std::int64_t first = first_chunk * grid.chunk, last = std::min(total, last_chunk * grid.chunk);
      transform_outputs<M>(g, grid, Mt + first * K, first, last - first, b, y, total * K);
    });
    return;
  }
  over_chunks(grid.chunks, threads, [&](std::int64_t first_chunk, std::int64_t last_chunk, int) {
    Op* V = scratch<Op>(0, static_cast<std::size_t>(Tl::positions * grid.chunk * C));
    T* Mt = scratch<T>(1, static_cast<std::size_t>(Tl::positions * grid.chunk * K));
    for (std::int64_t ch = first_chunk; ch < last_chunk; ++ch) {
      const std::int64_t first = ch * grid.chunk, count = std::min(grid.chunk, grid.total - first);
      transform_inputs<M, T>(g, grid, x, first, count, V);
      for (int p = 0; p < Tl::positions; ++p)
        product(false, count, K, C, V + p * count * C, C, U + p * C * K, K, Mt + p * count * K, K, false);
      transform_outputs<M>(g, grid, Mt, first, count, b, y);
    }
  });
}

// y = conv(x, w) + b in the geometry `run`, w being the weight of `of_weight` (flipped: of its
// input gradient, run = transposed_geometry(of_weight)). Op, Out and In as forward_transformed's.
template <int M, class T, class Op, class Out, class In, class W>
void filter_and_forward(const Conv2dGeometry& run, const Conv2dGeometry& of_weight, const W* w, bool flip, const In* x,
                        const T* b, Out* y) {
  if (run.batch == 0 || run.out_channels == 0 || run.out_plane() == 0) return;
  Op* U = scratch<Op>(3, static_cast<std::size_t>(Tiles<M>::positions * run.in_channels * run.out_channels));
  transform_filters<M, T>(of_weight, w, flip, U);
  forward_transformed<M, T, Op, Out, In>(run, x, U, b, y);
}

}  // namespace detail::winograd

// y[N, K, OH, OW] = conv(x[N, C, H, W], w[K, C, 3, 3]) + b[K] (b may be null); winograd_applies(g).
// Op = bfloat16 (T = float, where cpu_bf16_gemm_enabled): V and U rounded to bfloat16 and their
// products on vdpbf16ps, the transforms, M and the bias in float, y (Out) rounded once; x (In) and
// w (W) may be bfloat16 for T = float, widened as its tiles and filters are read.
template <int M, class T, class Op = T, class Out = T, class In = T, class W = T>
void winograd_forward(const Conv2dGeometry& g, const In* x, const W* w, const T* b, Out* y) {
  detail::winograd::filter_and_forward<M, T, Op, Out, In>(g, g, w, false, x, b, y);
}

// gx = dL/dx given gy = dL/dy; winograd_grad_input_applies(g). Op, Out, In (gy's) and W as
// winograd_forward's.
template <int M, class T, class Op = T, class Out = T, class In = T, class W = T>
void winograd_grad_input(const Conv2dGeometry& g, const W* w, const In* gy, Out* gx) {
  detail::winograd::filter_and_forward<M, T, Op, Out, In>(detail::transposed_geometry(g), g, w, true, gy,
                                                      static_cast<const T*>(nullptr), gx);
}

// gw = dL/dw given x and gy = dL/dy; winograd_applies(g). Chunks of tiles over the threads, each
// adding into its partial sums dU, added up at the end; or, where split_positions, the whole batch
// transformed and the positions split over the threads, each one GEMM over every tile. Op =
// bfloat16 (T = float, where cpu_bf16_gemm_enabled): the transformed x and gy rounded to bfloat16,
// their products on vdpbf16ps summed in float, the rest in float; x and gy (In) may be bfloat16
// for T = float, widened as their tiles are gathered.
template <int M, class T, class Op = T, class In = T>
void winograd_grad_weight(const Conv2dGeometry& g, const In* x, const In* gy, T* gw) {
  namespace wd = detail::winograd;
  using Tl = wd::Tiles<M>;
  const std::int64_t C = g.in_channels, K = g.out_channels, KC = K * C, partial_size = Tl::positions * KC;
  if (g.batch == 0 || g.out_plane() == 0) {
    std::fill(gw, gw + g.weight_numel(), T(0));
    return;
  }
  const wd::TileGrid grid = wd::tile_grid(g, M, Tl::positions * (C + K), num_threads());
  int threads = wd::threads_for(grid.chunks);
  std::vector<T*> partial(static_cast<std::size_t>(threads), nullptr);
  if (wd::split_positions(grid, C, K, threads)) {
    Op* V = scratch<Op>(0, static_cast<std::size_t>(Tl::positions * grid.total * C));
    Op* dM = scratch<Op>(1, static_cast<std::size_t>(Tl::positions * grid.total * K));
    T* dU = scratch<T>(2, static_cast<std::size_t>(partial_size));
    wd::over_chunks(grid.chunks, threads, [&](std::int64_t first_chunk, std::int64_t last_chunk, int) {
      const std::int64_t first = first_chunk * grid.chunk, last = std::min(grid.total, last_chunk * grid.chunk);
      wd::transform_inputs<M, T>(g, grid, x, first, last - first, V + first * C, grid.total * C);
      wd::transform_output_gradients<M, T>(g, grid, gy, first, last - first, dM + first * K, grid.total * K);
    });
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int p = 0; p < Tl::positions; ++p)
      wd::product(true, K, C, grid.total, dM + p * grid.total * K, K, V + p * grid.total * C, C, dU + p * KC, C,
                     false);
    partial.assign(1, dU);
    threads = 1;
  } else {
    wd::over_chunks(grid.chunks, threads, [&](std::int64_t first_chunk, std::int64_t last_chunk, int t) {
      Op* V = scratch<Op>(0, static_cast<std::size_t>(Tl::positions * grid.chunk * C));
      Op* dM = scratch<Op>(1, static_cast<std::size_t>(Tl::positions * grid.chunk * K));
      T* dU = scratch<T>(2, static_cast<std::size_t>(partial_size));  // dU[pos] is K x C
      std::fill(dU, dU + partial_size, T(0));
      partial[static_cast<std::size_t>(t)] = dU;
      for (std::int64_t ch = first_chunk; ch < last_chunk; ++ch) {
        const std::int64_t first = ch * grid.chunk, count = std::min(grid.chunk, grid.total - first);
        wd::transform_inputs<M, T>(g, grid, x, first, count, V);
        wd::transform_output_gradients<M, T>(g, grid, gy, first, count, dM);
        for (int p = 0; p < Tl::positions; ++p)
          wd::product(true, K, C, count, dM + p * count * K, K, V + p * count * C, C, dU + p * KC, C, true);
      }
    });
  }
  // gw[k][c] = G^T (sum over threads of dU[.][k][c]) G, lanes along c.
  constexpr int L = wd::lanes<T>;
  const int reduce_threads = wd::threads_for(KC >= 4096 ? K : 1);
#pragma omp parallel for num_threads(reduce_threads) schedule(static) if (reduce_threads > 1)
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t c0 = 0; c0 < C; c0 += L) {
      const int channels = static_cast<int>(std::min<std::int64_t>(L, C - c0));
      wd::Lanes<T> in[Tl::alpha][Tl::alpha], out[3][3];
      for (int p = 0; p < Tl::positions; ++p) {
        const std::int64_t at = p * KC + k * C + c0;
        wd::Lanes<T> sum = wd::load_lanes(partial[0] + at, channels);
        for (int u = 1; u < threads; ++u)  // OpenMP may have given a smaller team
          if (const T* part = partial[static_cast<std::size_t>(u)]) sum += wd::load_lanes(part + at, channels);
        in[p / Tl::alpha][p % Tl::alpha] = sum;
      }
      wd::sandwich<typename Tl::GT, T>(in, out);
      alignas(64) T values[3][3][L];
      std::memcpy(&values[0][0][0], &out[0][0], sizeof(values));
      for (int l = 0; l < channels; ++l) {
        T* dst = gw + (k * C + c0 + l) * 9;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) dst[i * 3 + j] = values[i][j][l];
      }
    }
}

}  // namespace ptrain::kernels
