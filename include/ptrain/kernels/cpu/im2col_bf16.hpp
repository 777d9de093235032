#pragma once
// im2col straight into the bfloat16 GEMM's packed panels (gemm_bf16.hpp), for convolutions whose
// output rows are as wide as the input's, at stride 1 (conv.hpp's same_width): there each row of
// the column matrix is the image plane shifted by the tap's offset, zero where the tap reads
// padding, so a panel's 32 columns of a row are one masked load from the image. The column matrix
// is never written: on UNet's 16- and 32-channel layers im2col and packing each cost a pass over
// it in memory for as little as 16 products per value.
// The words are pack_pairs' on the column matrix im2col writes, bit for bit.
#include <algorithm>
#include <cstdint>

#include "ptrain/core/half.hpp"
#include "ptrain/kernels/cpu/gemm_bf16.hpp"
#include "ptrain/kernels/geometry/conv.hpp"

namespace ptrain::kernels {

// Where the packing applies to a GEMM over a block of `images` images of g, output rows
// [row0, row0 + rows) of each: stride 1 and "same" width, no panel of the block's columns spanning
// two images, a kernel of at most im2col_max_taps taps, and fewer than 2^24 output pixels a plane
// (exact in float, see Im2colLanes::at).
inline constexpr std::int64_t im2col_max_taps = 32;
inline bool im2col_packs_from_image(const Conv2dGeometry& g, std::int64_t images, std::int64_t rows) {
  return g.kernel_area() <= im2col_max_taps && g.stride_h == 1 && g.stride_w == 1 && g.out_w == g.in_w &&
         (g.out_h + 1) * g.out_w < (std::int64_t{1} << 24) && (images == 1 || rows * g.out_w % 32 == 0);
}

#if defined(PTRAIN_HALF_X86)
namespace detail {

// 32 consecutive columns of the column matrix, one register of bfloat16 (those of one image,
// output pixels of x's images [row0, row0 + rows) rows; x holds the channels from the first the
// matrix reads, images in_image elements apart): where each tap of the kernel reads them in its
// channel's plane, and which of them read inside the image.
class Im2colLanes {
 public:
  Im2colLanes(const Conv2dGeometry& g, const bfloat16* x, std::int64_t in_image, std::int64_t row0, std::int64_t rows)
      : g_(g), x_(x), in_image_(in_image), row0_(row0), run_(rows * g.out_w), area_(g.kernel_area()) {
    for (std::int64_t tap = 0; tap < area_; ++tap)
      shift_[tap] = (tap / g.kernel_w * g.dilation_h - g.pad_h) * g.in_w + (tap % g.kernel_w * g.dilation_w - g.pad_w);
  }
  std::int64_t area() const { return area_; }

  // Columns [t, t + lanes) (lanes <= 32, all of one image); the others load as zero.
  PTRAIN_BF16_TARGET void at(std::int64_t t, std::int64_t lanes) {
    const std::int64_t W = g_.in_w, kh = g_.kernel_h, kw = g_.kernel_w;
    x_image_ = x_ + t / run_ * in_image_;
    q0_ = row0_ * W + t % run_;  // the first column's pixel in the plane
    // Each lane's output row and column, 16 lanes a half: q / W in float, then corrected by one
    // (exact: q < 2^24).
    __m512i oh[2], ow[2];
    const __m512i width = _mm512_set1_epi32(static_cast<int>(W));
    for (int half = 0; half < 2; ++half) {
      const __m512i q = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(q0_ + 16 * half)),
                                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
      // (maskz: GCC 12 warns that the unmasked conversions' undefined source is uninitialized)
      __m512i r = _mm512_maskz_cvttps_epi32(
          0xffff, _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, q), _mm512_set1_ps(1.0f / static_cast<float>(W))));
      __m512i c = _mm512_sub_epi32(q, _mm512_mullo_epi32(r, width));
      const __mmask16 below = _mm512_cmplt_epi32_mask(c, _mm512_setzero_si512());
      r = _mm512_mask_sub_epi32(r, below, r, _mm512_set1_epi32(1));
      c = _mm512_mask_add_epi32(c, below, c, width);
      const __mmask16 above = _mm512_cmpge_epi32_mask(c, width);
      oh[half] = _mm512_mask_add_epi32(r, above, r, _mm512_set1_epi32(1));
      ow[half] = _mm512_mask_sub_epi32(c, above, c, width);
    }
    const std::uint32_t in_matrix = lanes >= 32 ? ~std::uint32_t{0} : (std::uint32_t{1} << lanes) - 1;
    std::uint32_t row_valid[im2col_max_taps], column_valid[im2col_max_taps];
    for (std::int64_t i = 0; i < kh; ++i) row_valid[i] = inside(oh, i * g_.dilation_h - g_.pad_h, g_.in_h) & in_matrix;
    for (std::int64_t j = 0; j < kw; ++j) column_valid[j] = inside(ow, j * g_.dilation_w - g_.pad_w, W);
    for (std::int64_t tap = 0; tap < area_; ++tap) reads_image_[tap] = row_valid[tap / kw] & column_valid[tap % kw];
  }
  // The 32 columns of the matrix's row for (channel, tap): the plane shifted, zero where it reads
  // padding.
  PTRAIN_BF16_TARGET __m512i load(std::int64_t channel, std::int64_t tap) const {
    return _mm512_maskz_loadu_epi16(reads_image_[tap], x_image_ + channel * g_.in_plane() + q0_ + shift_[tap]);
  }

 private:
  // The lanes where v + offset lies in [0, bound) (an unsigned compare: negatives are large).
  PTRAIN_BF16_TARGET static std::uint32_t inside(const __m512i (&v)[2], std::int64_t offset, std::int64_t bound) {
    const __m512i o = _mm512_set1_epi32(static_cast<int>(offset)), b = _mm512_set1_epi32(static_cast<int>(bound));
    return static_cast<std::uint32_t>(_mm512_cmplt_epu32_mask(_mm512_add_epi32(v[0], o), b)) |
           static_cast<std::uint32_t>(_mm512_cmplt_epu32_mask(_mm512_add_epi32(v[1], o), b)) << 16;
  }

  const Conv2dGeometry& g_;
  const bfloat16* x_;
  std::int64_t in_image_, row0_, run_, area_;
  std::int64_t shift_[im2col_max_taps];
  const bfloat16* x_image_ = nullptr;
  std::int64_t q0_ = 0;
  __mmask32 reads_image_[im2col_max_taps] = {};
};

// Packs columns [col0, col0 + count) of the column matrix over its rows [k0, k0 + kc), as
// pack_pairs(true, col, ...) packs them from im2col's matrix (B of the forward GEMM), where column
// t is output pixel (row0 * OW + t % run) of image t / run (run = rows * OW) of x's images, when
// im2col_packs_from_image holds; x as Im2colLanes's.
PTRAIN_BF16_TARGET inline void pack_im2col_columns(const Conv2dGeometry& g, const bfloat16* x, std::int64_t in_image,
                                                   std::int64_t row0, std::int64_t rows, std::int64_t col0,
                                                   std::int64_t count, std::int64_t k0, std::int64_t kc,
                                                   std::uint32_t* out) {
  constexpr std::int64_t width = bf16_nr;
  static_assert(width == 32, "a panel is one register of 32 bfloat16");
  const std::int64_t pairs = (kc + 1) / 2;
  const __m512i low_half = _mm512_load_si512(pair_interleave[0]), high_half = _mm512_load_si512(pair_interleave[1]);
  Im2colLanes lanes(g, x, in_image, row0, rows);
  const std::int64_t area = lanes.area();
  for (std::int64_t l0 = 0; l0 < count; l0 += width) {
    lanes.at(col0 + l0, std::min(width, count - l0));
    std::int64_t channel = k0 / area, tap = k0 % area;  // of row k
    std::uint32_t* panel = out + l0 * pairs;
    for (std::int64_t k = 0, p = 0; p < pairs; ++p) {
      __m512i rows_of_pair[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      for (int r = 0; r < 2 && k < kc; ++r, ++k) {
        rows_of_pair[r] = lanes.load(channel, tap);
        if (++tap == area) {
          tap = 0;
          ++channel;
        }
      }
      _mm512_storeu_si512(panel + p * width, _mm512_permutex2var_epi16(rows_of_pair[0], low_half, rows_of_pair[1]));
      _mm512_storeu_si512(panel + p * width + 16,
                          _mm512_permutex2var_epi16(rows_of_pair[0], high_half, rows_of_pair[1]));
    }
  }
}

// Packs rows [line0, line0 + count) of the column matrix over its columns [k0, k0 + kc), as
// pack_pairs(false, col, ...) packs them from im2col's matrix (the transposed B of the weight
// gradient's GEMM); columns and x as pack_im2col_columns'. k0 is a multiple of 32 where the matrix
// holds several images.
PTRAIN_BF16_TARGET inline void pack_im2col_rows(const Conv2dGeometry& g, const bfloat16* x, std::int64_t in_image,
                                                std::int64_t row0, std::int64_t rows, std::int64_t line0,
                                                std::int64_t count, std::int64_t k0, std::int64_t kc,
                                                std::uint32_t* out) {
  constexpr std::int64_t width = bf16_nr;
  const std::int64_t pairs = (kc + 1) / 2;
  Im2colLanes lanes(g, x, in_image, row0, rows);
  const std::int64_t area = lanes.area();
  for (std::int64_t p0 = 0; p0 < pairs; p0 += 16) {  // 16 pairs: 32 columns, one register a line
    lanes.at(k0 + 2 * p0, std::min<std::int64_t>(32, kc - 2 * p0));
    const std::int64_t stored = std::min<std::int64_t>(16, pairs - p0);
    std::int64_t channel = line0 / area, tap = line0 % area;  // of line l
    for (std::int64_t l = 0; l < (count + width - 1) / width * width; l += 16) {  // the last panel padded with zeros
      __m512i words[16];
      for (int i = 0; i < 16; ++i) {
        if (l + i >= count) {
          words[i] = _mm512_setzero_si512();
          continue;
        }
        words[i] = lanes.load(channel, tap);
        if (++tap == area) {
          tap = 0;
          ++channel;
        }
      }
      transpose_words16(words);
      std::uint32_t* to = out + l / width * width * pairs + p0 * width + l % width;  // panel, pair, line in it
      for (std::int64_t q = 0; q < stored; ++q) _mm512_storeu_si512(to + q * width, words[q]);
    }
  }
}

}  // namespace detail
#endif

}  // namespace ptrain::kernels
