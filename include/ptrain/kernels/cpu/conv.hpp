#pragma once
// 2D convolution on CPU, NCHW, as im2col + GEMM (torch.nn.functional.conv2d semantics:
// cross-correlation with stride, zero padding, dilation and groups; weight [K, C/groups, kh, kw]).
//
// Work is split over the images of the batch: each thread takes a contiguous run of images and
// calls single-threaded BLAS on its own column buffer, so im2col/col2im run in parallel too and
// the GEMMs need no synchronisation. Images with few output pixels are grouped so that a GEMM has
// enough columns (a GEMM with 16 columns runs at ~60% of one with 512); large images are cut into
// bands of output rows so that the column buffer stays within budget (ConvBlocking).
// 1x1 stride-1 unpadded convolutions read the image itself as the column matrix; stride-1 input
// gradients run as a transposed convolution through the forward path (no col2im); grad-weight
// partial sums are per thread, added up at the end. Per-thread scratch (kept between calls, see
// scratch.hpp): slot 0 columns, 1 output or gathered gradient block, 2 grad-weight partial sums,
// 3 the flipped weight. half and bfloat16 are computed in float (widen.hpp), or for bfloat16 on
// vdpbf16ps where the CPU has it: im2col in bfloat16, each GEMM's result and every sum in float,
// y and a stride-1 gx rounded to bfloat16 block by block (no float copy of the whole tensor).
// conv2d_forward and conv2d_backward run a 3x3 stride-1 layer's passes by Winograd instead
// (winograd.hpp) where conv_algorithm.hpp finds it faster.
#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/device/threads.hpp"
#include "ptrain/kernels/cpu/conv_algorithm.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"
#include "ptrain/kernels/cpu/im2col_bf16.hpp"
#include "ptrain/kernels/cpu/scratch.hpp"
#include "ptrain/kernels/cpu/widen.hpp"
#include "ptrain/kernels/cpu/winograd.hpp"
#include "ptrain/kernels/geometry/conv.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain::kernels {

namespace detail {

// The outputs o in [lo, hi) of [0, out) whose input o * stride + offset lies in [0, in); the
// others read padding.
struct ValidRange {
  std::int64_t lo, hi;
};
inline ValidRange valid_columns(std::int64_t offset, std::int64_t stride, std::int64_t in, std::int64_t out) {
  std::int64_t lo = offset < 0 ? (-offset + stride - 1) / stride : 0;
  std::int64_t hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}
// Stride 1 and an output as wide as the input ("same" padding): each output row of a tap is an
// input row shifted, and a band of them is one shifted block of the plane.
inline bool same_width(const Conv2dGeometry& g) {
  return g.stride_w == 1 && g.stride_h == 1 && g.out_w == g.in_w;
}
// Zeroes columns [0, lo) and [hi, width) of rows [r_lo, r_hi) of a row-major block. Column by
// column: these are one or two entries a row, and a row-wise loop becomes a memset call each.
template <class T>
void zero_columns(T* block, std::int64_t width, std::int64_t r_lo, std::int64_t r_hi, std::int64_t lo,
                  std::int64_t hi) {
  for (std::int64_t ow = 0; ow < lo; ++ow)
    for (std::int64_t r = r_lo; r < r_hi; ++r) block[r * width + ow] = T(0);
  for (std::int64_t ow = hi; ow < width; ++ow)
    for (std::int64_t r = r_lo; r < r_hi; ++r) block[r * width + ow] = T(0);
}
// Rows r of a band whose input row (row0 + r) * stride + offset lies in [0, in).
inline ValidRange valid_rows(std::int64_t row0, std::int64_t rows, std::int64_t stride, std::int64_t offset,
                             std::int64_t in) {
  return valid_columns(offset + row0 * stride, stride, in, rows);
}

}  // namespace detail

// Columns of one image for output rows [row0, row0 + rows): col[(c*kh + i)*kw + j][r*OW + ow] =
// x[c][oh*sh - ph + i*dh][ow*sw - pw + j*dw] (zero outside), rows ldc apart.
template <class T>
void im2col(const Conv2dGeometry& g, const T* x, std::int64_t row0, std::int64_t rows, T* col, std::int64_t ldc) {
  using detail::valid_columns;
  using detail::valid_rows;
  const std::int64_t H = g.in_h, W = g.in_w, OW = g.out_w, sw = g.stride_w, sh = g.stride_h;
  for (std::int64_t c = 0; c < g.in_channels; ++c) {
    const T* plane = x + c * H * W;
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      const std::int64_t off_h = i * g.dilation_h - g.pad_h;
      const auto [r_lo, r_hi] = valid_rows(row0, rows, sh, off_h, H);
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        T* dst = col + ((c * g.kernel_h + i) * g.kernel_w + j) * ldc;
        const std::int64_t off_w = j * g.dilation_w - g.pad_w;
        const auto [lo, hi] = valid_columns(off_w, sw, W, OW);
        std::fill(dst, dst + r_lo * OW, T(0));
        std::fill(dst + r_hi * OW, dst + rows * OW, T(0));
        if (r_hi <= r_lo) continue;
        if (detail::same_width(g)) {
          // Output row r is input row r + off_h shifted by off_w: one block copy of the band,
          // then zeros where a row's shift wrapped into its neighbour.
          const std::int64_t shift = (row0 + off_h) * W + off_w;  // dst index + shift = src index
          const std::int64_t q0 = r_lo * W, q1 = r_hi * W;
          const std::int64_t a = std::clamp(-shift, q0, q1), b = std::clamp(H * W - shift, a, q1);
          std::fill(dst + q0, dst + a, T(0));
          std::copy(plane + a + shift, plane + b + shift, dst + a);
          std::fill(dst + b, dst + q1, T(0));
          detail::zero_columns(dst, W, r_lo, r_hi, lo, hi);
          continue;
        }
        const T* src = plane + ((row0 + r_lo) * sh + off_h) * W;  // first input row read
        dst += r_lo * OW;
        for (std::int64_t r = r_lo; r < r_hi; ++r, dst += OW, src += sh * W) {
          for (std::int64_t ow = 0; ow < lo; ++ow) dst[ow] = T(0);
          if (sw == 1)
            std::copy(src + lo + off_w, src + hi + off_w, dst + lo);
          else if (sw == 2)  // a constant stride: the compiler vectorises it
            for (std::int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * 2 + off_w];
          else
            for (std::int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * sw + off_w];
          for (std::int64_t ow = hi; ow < OW; ++ow) dst[ow] = T(0);
        }
      }
    }
  }
}

// The adjoint of im2col: adds the columns back onto the image gx (padding reads are dropped).
// col is scratch: its entries that read padding may be zeroed.
template <class T>
void col2im(const Conv2dGeometry& g, T* col, std::int64_t ldc, std::int64_t row0, std::int64_t rows, T* gx) {
  using detail::valid_columns;
  using detail::valid_rows;
  const std::int64_t H = g.in_h, W = g.in_w, OW = g.out_w, sw = g.stride_w, sh = g.stride_h;
  for (std::int64_t c = 0; c < g.in_channels; ++c) {
    T* plane = gx + c * H * W;
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      const std::int64_t off_h = i * g.dilation_h - g.pad_h;
      const auto [r_lo, r_hi] = valid_rows(row0, rows, sh, off_h, H);
      if (r_hi <= r_lo) continue;
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        T* src = col + ((c * g.kernel_h + i) * g.kernel_w + j) * ldc;
        const std::int64_t off_w = j * g.dilation_w - g.pad_w;
        const auto [lo, hi] = valid_columns(off_w, sw, W, OW);
        if (detail::same_width(g)) {
          // im2col's block copy in reverse: the entries that read padding are zeroed in col first
          // so that adding them where the shift wraps changes nothing.
          detail::zero_columns(src, W, r_lo, r_hi, lo, hi);
          const std::int64_t shift = (row0 + off_h) * W + off_w;
          const std::int64_t a = std::clamp(-shift, r_lo * W, r_hi * W), b = std::clamp(H * W - shift, a, r_hi * W);
          T* dst = plane + (a + shift);
          const T* from = src + a;
          for (std::int64_t q = 0; q < b - a; ++q) dst[q] += from[q];
          continue;
        }
        src += r_lo * OW;
        T* dst = plane + ((row0 + r_lo) * sh + off_h) * W;  // first input row written
        for (std::int64_t r = r_lo; r < r_hi; ++r, src += OW, dst += sh * W) {
          if (sw == 1)
            for (std::int64_t ow = lo; ow < hi; ++ow) dst[ow + off_w] += src[ow];
          else if (sw == 2)
            for (std::int64_t ow = lo; ow < hi; ++ow) dst[ow * 2 + off_w] += src[ow];
          else
            for (std::int64_t ow = lo; ow < hi; ++ow) dst[ow * sw + off_w] += src[ow];
        }
      }
    }
  }
}

// How work is cut into GEMMs. Below ~256 columns sgemm loses speed (a 2-core Zen 3 with
// OpenBLAS). The column buffer stays within a core's L2 (2^18 elements: 512 KB of bfloat16), from
// where the bfloat16 GEMM packs it: at 2^21, UNet's bfloat16 step took 8% longer (its 16- and
// 32-channel layers at 64x64 to 128x128); the float steps took the same (2-core Zen 4).
struct ConvBlocking {
  std::int64_t target_columns = 512;             // group small images until a GEMM has this many
  std::int64_t column_budget = std::int64_t{1} << 18;  // elements of im2col buffer per thread
};

namespace detail {

// A GEMM-sized piece of work: `images` whole images from `image`, or output rows
// [row0, row0 + rows) of one image.
struct ConvBlock {
  std::int64_t image, images, row0, rows;
};

// Calls f(block) for the images [first, last) in GEMM-sized blocks.
template <class F>
void for_each_block(const Conv2dGeometry& g, const ConvBlocking& blocking, std::int64_t first, std::int64_t last,
                    F&& f) {
  const std::int64_t P = g.out_plane();
  const std::int64_t target_columns = std::max<std::int64_t>(1, blocking.target_columns);
  const std::int64_t column_budget = std::max<std::int64_t>(1, blocking.column_budget);
  const std::int64_t rows_per_col = std::max<std::int64_t>(1, g.col_rows());
  if (P >= target_columns || last - first == 1) {
    const std::int64_t band = std::clamp<std::int64_t>(column_budget / (rows_per_col * g.out_w), 1, g.out_h);
    const std::int64_t band_rows = std::max(band, std::min(g.out_h, (target_columns + g.out_w - 1) / g.out_w));
    for (std::int64_t n = first; n < last; ++n)
      for (std::int64_t r = 0; r < g.out_h; r += band_rows) f(ConvBlock{n, 1, r, std::min(band_rows, g.out_h - r)});
    return;
  }
  const std::int64_t by_target = (target_columns + P - 1) / P;
  const std::int64_t by_budget = std::max<std::int64_t>(1, column_budget / (rows_per_col * P));
  const std::int64_t per_block = std::max<std::int64_t>(1, std::min(by_target, by_budget));
  for (std::int64_t n = first; n < last; n += per_block) f(ConvBlock{n, std::min(per_block, last - n), 0, g.out_h});
}

// Below this many flops a convolution runs on one thread: a fork and join costs microseconds,
// and far more when the cores are shared.
inline constexpr double parallel_flops = 4e6;

// Runs body(first_image, last_image, thread, team) on each thread of a team over the batch, with
// Each thread's GEMMs stay on that thread (kernels::gemm does not split inside a parallel
// region); a batch smaller than the thread count, or little work, runs serially.
template <class Body>
void parallel_over_images(const Conv2dGeometry& g, Body&& body) {
  const std::int64_t batch = g.batch;
  const int threads = g.flops() < parallel_flops ? 1 : static_cast<int>(std::min<std::int64_t>(num_threads(), batch));
  if (threads <= 1) {
    body(0, batch, 0, 1);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t t = thread_index(), team = team_size();
    body(batch * t / team, batch * (t + 1) / team, static_cast<int>(t), static_cast<int>(team));
  }
}

}  // namespace detail

namespace detail {

// y's part of a block (+ b[k], b may be null) from its GEMM's result C [K, cols], rounded where Out
// is narrower than Acc.
template <class Acc, class Out>
void write_block_output(const Conv2dGeometry& g, const ConvBlock& blk, Acc* C, std::int64_t cols, const Acc* b,
                        Out* y) {
  const std::int64_t K = g.out_channels, P = g.out_plane(), OW = g.out_w;
  const std::int64_t run = blk.rows * OW;  // one image's pixels in the block
  for (std::int64_t m = 0; m < blk.images; ++m) {
    Out* y_img = y + (blk.image + m) * K * P + blk.row0 * OW;
    for (std::int64_t k = 0; k < K; ++k) {
      Acc* src = C + k * cols + m * run;
      Out* dst = y_img + k * P;
      const Acc bk = b ? b[k] : Acc(0);
      if constexpr (std::is_same_v<Out, Acc>) {
        for (std::int64_t p = 0; p < run; ++p) dst[p] = src[p] + bk;
      } else {
        if (b)
          for (std::int64_t p = 0; p < run; ++p) src[p] += bk;
        convert(std::span<const Acc>(src, static_cast<std::size_t>(run)),
                std::span<Out>(dst, static_cast<std::size_t>(run)));
      }
    }
  }
}

// y[N, K, OH, OW] = conv(x[N, C, H, W], w[K, C/groups, kh, kw]) + b[K] (b may be null): the
// operands in T, the GEMMs' results and the bias in Acc (T, or float for bfloat16 operands), y in
// Out, by im2col + GEMM. An Out narrower than Acc is rounded once, block by block as each GEMM's
// result is still in cache, instead of in a pass over a whole Acc copy of y.
template <class T, class Acc, class Out>
void conv2d_forward_gemm_into(const Conv2dGeometry& g, const T* x, const T* w, const Acc* b, Out* y,
                              const ConvBlocking& blocking = {}) {
  const std::int64_t K = g.out_channels, P = g.out_plane(), OW = g.out_w;
  const std::int64_t G = g.groups, Kg = K / G, Rg = g.group_rows();
  const std::int64_t in_image = g.in_channels * g.in_plane(), out_image = K * P;
  if (g.batch == 0 || K == 0 || P == 0) return;
#if defined(PTRAIN_HALF_X86)
  // bfloat16 operands on vdpbf16ps: the columns packed straight from the image where they can be.
  [[maybe_unused]] const bool on_bf16_dot = std::is_same_v<T, bfloat16> && cpu_bf16_gemm_enabled();
#endif
  detail::parallel_over_images(g, [&](std::int64_t first, std::int64_t last, int, int) {
    detail::for_each_block(g, blocking, first, last, [&](const detail::ConvBlock& blk) {
      const std::int64_t cols = blk.images * blk.rows * OW;
      const T* x_img = x + blk.image * in_image;
#if defined(PTRAIN_HALF_X86)
      if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<Acc, float>)
        if (on_bf16_dot && !g.is_pointwise() && im2col_packs_from_image(g, blk.images, blk.rows)) {
          Acc* C = scratch<Acc>(1, static_cast<std::size_t>(K * cols));
          for (std::int64_t grp = 0; grp < G; ++grp) {
            const T* x_group = x_img + grp * (g.in_channels / G) * g.in_plane();
            detail::gemm_bf16_packing(
                false, Kg, cols, Rg, 1.0f, w + grp * Kg * Rg, Rg,
                [&](std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc, std::uint32_t* out) {
                  detail::pack_im2col_columns(g, x_group, in_image, blk.row0, blk.rows, jc, nc, pc, kc, out);
                },
                0.0f, C + grp * Kg * cols, cols);
          }
          detail::write_block_output(g, blk, C, cols, b, y);
          return;
        }
#endif
      const T* B;
      std::int64_t ldb;
      if (g.is_pointwise() && blk.images == 1) {
        B = x_img + blk.row0 * OW;
        ldb = P;
      } else {
        T* col = scratch<T>(0, static_cast<std::size_t>(g.col_rows() * cols));
        for (std::int64_t m = 0; m < blk.images; ++m)
          im2col(g, x_img + m * in_image, blk.row0, blk.rows, col + m * blk.rows * OW, cols);
        B = col;
        ldb = cols;
      }
      Acc* C;
      std::int64_t ldc;
      if constexpr (std::is_same_v<Out, Acc>) {
        if (blk.images == 1) {  // the GEMM writes y itself
          C = y + blk.image * out_image + blk.row0 * OW;
          ldc = P;
          for (std::int64_t grp = 0; grp < G; ++grp)
            gemm(false, false, Kg, cols, Rg, Acc(1), w + grp * Kg * Rg, Rg, B + grp * Rg * ldb, ldb, Acc(0),
                 C + grp * Kg * ldc, ldc);
          if (b)
            for (std::int64_t k = 0; k < K; ++k) {
              Acc* row = C + k * ldc;
              const Acc bk = b[k];
              for (std::int64_t p = 0; p < cols; ++p) row[p] += bk;
            }
          return;
        }
      }
      C = scratch<Acc>(1, static_cast<std::size_t>(K * cols));
      ldc = cols;
      for (std::int64_t grp = 0; grp < G; ++grp)
        gemm(false, false, Kg, cols, Rg, Acc(1), w + grp * Kg * Rg, Rg, B + grp * Rg * ldb, ldb, Acc(0),
             C + grp * Kg * ldc, ldc);
      detail::write_block_output(g, blk, C, cols, b, y);
    });
  });
}

// The same with y in Acc.
template <class T, class Acc>
void conv2d_forward_gemm(const Conv2dGeometry& g, const T* x, const T* w, const Acc* b, Acc* y,
                         const ConvBlocking& blocking = {}) {
  conv2d_forward_gemm_into<T, Acc, Acc>(g, x, w, b, y, blocking);
}

}  // namespace detail

namespace detail {

// With stride 1 the input gradient is itself a convolution: of gy, by the kernel flipped in space
// with input and output channels swapped (per group), padded by dilation * (k - 1) - pad. Run as
// a forward pass its GEMM has the shape [C, K*kh*kw] x [K*kh*kw, P], faster than the [C*kh*kw, K]
// x [K, P] of col2im's route, and it writes the image directly instead of a column buffer. With
// few input channels (an RGB stem, depthwise) that GEMM has too few rows and col2im wins.
inline bool grad_input_is_convolution(const Conv2dGeometry& g) {
  return g.stride_h == 1 && g.stride_w == 1 && g.pad_h <= g.dilation_h * (g.kernel_h - 1) &&
         g.pad_w <= g.dilation_w * (g.kernel_w - 1) && g.in_channels / g.groups >= 16;
}
// wt[grp*Cg + c][k][i][j] = w[grp*Kg + k][c][kh-1-i][kw-1-j]: the weight of transposed_geometry(g).
template <class T>
void transpose_flip_weight(const Conv2dGeometry& g, const T* w, T* wt) {
  const std::int64_t G = g.groups, Kg = g.out_channels / G, Cg = g.in_channels / G;
  const std::int64_t kh = g.kernel_h, kw = g.kernel_w, area = g.kernel_area();
  // In tiles of 32 x 32 (k, c), wt written along k: a tile's lines of w stay in L1 while it is read.
  // The threads take runs of wt's rows (a ResNet-50's 1x1 weights are up to a million entries).
  constexpr std::int64_t tile = 32;
#pragma omp parallel for collapse(2) if (g.weight_numel() >= (std::int64_t{1} << 16)) schedule(static)
  for (std::int64_t grp = 0; grp < G; ++grp)
    for (std::int64_t c0 = 0; c0 < Cg; c0 += tile)
      for (std::int64_t k0 = 0; k0 < Kg; k0 += tile)
        for (std::int64_t c = c0; c < std::min(Cg, c0 + tile); ++c)
          for (std::int64_t k = k0; k < std::min(Kg, k0 + tile); ++k) {
            const T* src = w + ((grp * Kg + k) * Cg + c) * area;
            T* dst = wt + ((grp * Cg + c) * Kg + k) * area;
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) dst[(kh - 1 - i) * kw + (kw - 1 - j)] = src[i * kw + j];
          }
}

// gx as the forward pass of transposed_geometry(g) (where grad_input_is_convolution), the GEMMs'
// results in Acc, gx in Out.
template <class T, class Acc, class Out>
void grad_input_by_convolution(const Conv2dGeometry& g, const T* w, const T* gy, Out* gx,
                               const ConvBlocking& blocking) {
  T* wt = scratch<T>(3, static_cast<std::size_t>(g.weight_numel()));
  transpose_flip_weight(g, w, wt);
  conv2d_forward_gemm_into<T, Acc, Out>(transposed_geometry(g), gy, wt, nullptr, gx, blocking);
}

}  // namespace detail

// gb[K] = sum of gy over images and pixels.
template <class T, class Acc = T>
void conv2d_grad_bias(const Conv2dGeometry& g, const T* gy, Acc* gb) {
  const std::int64_t K = g.out_channels, P = g.out_plane();
#pragma omp parallel for if (g.batch * K * P >= 32768) schedule(static)
  for (std::int64_t k = 0; k < K; ++k) {
    double sum = 0;
    for (std::int64_t n = 0; n < g.batch; ++n)  // Eigen's sum is vectorised, a plain loop is not
      sum += static_cast<double>(Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(gy + (n * K + k) * P, P)
                                     .template cast<accumulate_t<T>>()  // 16-bit planes add in float
                                     .sum());
    gb[k] = static_cast<Acc>(sum);
  }
}

namespace detail {

// conv2d_backward (below) with the operands in T and the gradients in Acc, as conv2d_forward_gemm.
template <class T, class Acc>
void conv2d_backward_gemm(const Conv2dGeometry& g, const T* x, const T* w, const T* gy, Acc* gx, Acc* gw, Acc* gb,
                          const ConvBlocking& blocking = {}) {
  const std::int64_t K = g.out_channels, P = g.out_plane(), OW = g.out_w;
  const std::int64_t G = g.groups, Kg = K / G, Rg = g.group_rows();
  const std::int64_t in_image = g.in_channels * g.in_plane(), out_image = K * P;
  const std::int64_t wsize = g.weight_numel();
  if (gb) conv2d_grad_bias(g, gy, gb);
  if (!gx && !gw) return;
  if (g.batch == 0 || K == 0 || P == 0) {
    if (gx) std::fill(gx, gx + g.batch * in_image, Acc(0));
    if (gw) std::fill(gw, gw + wsize, Acc(0));
    return;
  }
  if (gx && detail::grad_input_is_convolution(g)) {
    grad_input_by_convolution<T, Acc>(g, w, gy, gx, blocking);
    gx = nullptr;
    if (!gw) return;
  }
#if defined(PTRAIN_HALF_X86)
  // bfloat16 operands on vdpbf16ps: the columns packed straight from the image where they can be.
  [[maybe_unused]] const bool on_bf16_dot = std::is_same_v<T, bfloat16> && cpu_bf16_gemm_enabled();
#endif
  std::vector<Acc*> partial(static_cast<std::size_t>(std::max(1, num_threads())), nullptr);
  parallel_over_images(g, [&](std::int64_t first, std::int64_t last, int t, int team) {
    // Each thread sums its images' weight gradient on its own; thread 0 directly into gw.
    Acc* acc = nullptr;
    if (gw) {
      acc = t == 0 ? gw : scratch<Acc>(2, static_cast<std::size_t>(wsize));
      std::fill(acc, acc + wsize, Acc(0));
      partial[static_cast<std::size_t>(t)] = acc;
    }
    for_each_block(g, blocking, first, last, [&](const ConvBlock& blk) {
      const std::int64_t cols = blk.images * blk.rows * OW;
      const T* x_img = x ? x + blk.image * in_image : nullptr;
      const bool direct = blk.images == 1;
      const T* Gy;
      std::int64_t ldg;
      if (direct) {
        Gy = gy + blk.image * out_image + blk.row0 * OW;
        ldg = P;
      } else {
        T* gather = scratch<T>(1, static_cast<std::size_t>(K * cols));
        for (std::int64_t m = 0; m < blk.images; ++m)
          for (std::int64_t k = 0; k < K; ++k) {
            const T* src = gy + (blk.image + m) * out_image + k * P;
            std::copy(src, src + P, gather + k * cols + m * P);
          }
        Gy = gather;
        ldg = cols;
      }
      const bool pointwise = g.is_pointwise() && direct;
      bool packed_from_image = false;
#if defined(PTRAIN_HALF_X86)
      if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<Acc, float>)
        if (acc && on_bf16_dot && !g.is_pointwise() && im2col_packs_from_image(g, blk.images, blk.rows)) {
          for (std::int64_t grp = 0; grp < G; ++grp) {
            const T* x_group = x_img + grp * (g.in_channels / G) * g.in_plane();
            detail::gemm_bf16_packing(
                false, Kg, Rg, cols, 1.0f, Gy + grp * Kg * ldg, ldg,
                [&](std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc, std::uint32_t* out) {
                  detail::pack_im2col_rows(g, x_group, in_image, blk.row0, blk.rows, jc, nc, pc, kc, out);
                },
                1.0f, acc + grp * Kg * Rg, Rg);
          }
          packed_from_image = true;
        }
#endif
      if (acc && !packed_from_image) {
        T* col = pointwise ? nullptr : scratch<T>(0, static_cast<std::size_t>(g.col_rows() * cols));
        const T* B;
        std::int64_t ldb;
        if (pointwise) {
          B = x_img + blk.row0 * OW;
          ldb = P;
        } else {
          for (std::int64_t m = 0; m < blk.images; ++m)
            im2col(g, x_img + m * in_image, blk.row0, blk.rows, col + m * blk.rows * OW, cols);
          B = col;
          ldb = cols;
        }
        for (std::int64_t grp = 0; grp < G; ++grp)
          gemm(false, true, Kg, Rg, cols, Acc(1), Gy + grp * Kg * ldg, ldg, B + grp * Rg * ldb, ldb, Acc(1),
               acc + grp * Kg * Rg, Rg);
      }
      if (!gx) return;
      if (pointwise) {
        Acc* gx_img = gx + blk.image * in_image + blk.row0 * OW;
        for (std::int64_t grp = 0; grp < G; ++grp)
          gemm(true, false, Rg, cols, Kg, Acc(1), w + grp * Kg * Rg, Rg, Gy + grp * Kg * ldg, ldg, Acc(0),
               gx_img + grp * Rg * P, P);
        return;
      }
      // The columns' gradient, in Acc: the same buffer as col when T is Acc.
      Acc* gcol = scratch<Acc>(0, static_cast<std::size_t>(g.col_rows() * cols));
      for (std::int64_t grp = 0; grp < G; ++grp)
        gemm(true, false, Rg, cols, Kg, Acc(1), w + grp * Kg * Rg, Rg, Gy + grp * Kg * ldg, ldg, Acc(0),
             gcol + grp * Rg * cols, cols);
      for (std::int64_t m = 0; m < blk.images; ++m) {
        Acc* gx_img = gx + (blk.image + m) * in_image;
        if (blk.row0 == 0) std::fill(gx_img, gx_img + in_image, Acc(0));
        col2im(g, gcol + m * blk.rows * OW, cols, blk.row0, blk.rows, gx_img);
      }
    });
    if (!gw || team == 1) return;
#pragma omp barrier
#pragma omp for schedule(static)
    for (std::int64_t e = 0; e < wsize; ++e) {
      Acc s = gw[e];
      for (int u = 1; u < team; ++u) s += partial[static_cast<std::size_t>(u)][e];
      gw[e] = s;
    }
  });
}

}  // namespace detail

// y[N, K, OH, OW] = conv(x[N, C, H, W], w[K, C/groups, kh, kw]) + b[K] (b may be null): Winograd
// or im2col + GEMM where Winograd applies (conv_algorithm.hpp), im2col + GEMM elsewhere.
template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                    const ConvBlocking& blocking = {}) {
  if (g.batch == 0 || g.out_channels == 0 || g.out_plane() == 0) return;
  if (!winograd_applies(g)) {
    detail::conv2d_forward_gemm<T, T>(g, x, w, b, y, blocking);
    return;
  }
  run_conv_pass(g, ConvPass::forward, sizeof(T), [&](ConvAlgorithm a) {
    if (a == ConvAlgorithm::winograd2) winograd_forward<2>(g, x, w, b, y);
    else if (a == ConvAlgorithm::winograd4) winograd_forward<4>(g, x, w, b, y);
    else detail::conv2d_forward_gemm<T, T>(g, x, w, b, y, blocking);
  });
}

// Given gy = dL/dy, writes (not adds) gx = dL/dx, gw = dL/dw and gb = dL/db; any of them may be
// null to skip it (gx for a network's first layer, gb without bias). Each of gx and gw as
// conv2d_forward chooses.
template <class T>
void conv2d_backward(const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx, T* gw, T* gb,
                     const ConvBlocking& blocking = {}) {
  const bool has_work = g.batch > 0 && g.out_channels > 0 && g.out_plane() > 0;
  if (has_work && gx && winograd_grad_input_applies(g)) {
    run_conv_pass(g, ConvPass::grad_input, sizeof(T), [&](ConvAlgorithm a) {
      if (a == ConvAlgorithm::winograd2) winograd_grad_input<2, T>(g, w, gy, gx);
      else if (a == ConvAlgorithm::winograd4) winograd_grad_input<4, T>(g, w, gy, gx);
      else detail::conv2d_backward_gemm<T, T>(g, nullptr, w, gy, gx, nullptr, nullptr, blocking);
    });
    gx = nullptr;
  }
  if (has_work && gw && winograd_applies(g)) {
    run_conv_pass(g, ConvPass::grad_weight, sizeof(T), [&](ConvAlgorithm a) {
      if (a == ConvAlgorithm::winograd2) winograd_grad_weight<2>(g, x, gy, gw);
      else if (a == ConvAlgorithm::winograd4) winograd_grad_weight<4>(g, x, gy, gw);
      else detail::conv2d_backward_gemm<T, T>(g, x, nullptr, gy, nullptr, gw, nullptr, blocking);
    });
    gw = nullptr;
  }
  detail::conv2d_backward_gemm<T, T>(g, x, w, gy, gx, gw, gb, blocking);
}

// What the bfloat16 passes' products run on where cpu_bf16_gemm_enabled (default_conv_algorithm's
// choice depends on it): AMX tiles where cpu_amx_enabled, else vdpbf16ps.
inline ConvProducts bf16_conv_products() {
  return cpu_amx_enabled() ? ConvProducts::bf16_amx : ConvProducts::bf16_dot;
}

// The 16-bit types: the float kernels on widened copies (im2col and the GEMMs in float, each
// gradient summed over the batch in float), the results rounded once. bfloat16 on vdpbf16ps
// (cpu_bf16_gemm_enabled) skips the copies of the operands: the same kernels with T = bfloat16
// and Acc = float, y and the grad input by convolution rounded as each block's GEMM ends; except
// where Winograd applies and conv_algorithm() picks F(2x2, 3x3) for a pass (by shape, auto needing
// more channels than for float, and on AMX a smaller output plane: default_conv_algorithm's
// products), which runs winograd.hpp's
// with bfloat16 products on vdpbf16ps (transforms in float, the tiles of x and gy widened as they
// are gathered, each result rounded once). A forced F(4x4, 3x3) runs in float on widened copies: its transforms are too
// inexact for bfloat16 operands.
template <class T>
  requires is_reduced_float_v<T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                    const ConvBlocking& blocking = {}) {
  const Tensor<float> bf = widen(b, g.out_channels);
  if constexpr (std::is_same_v<T, bfloat16>)
    if (cpu_bf16_gemm_enabled()) {
      if (!winograd_applies(g) || g.batch == 0 || g.out_channels == 0 || g.out_plane() == 0) {
        detail::conv2d_forward_gemm_into<T, float, T>(g, x, w, data_or_null(bf), y, blocking);
        return;
      }
      run_conv_pass(g, ConvPass::forward, sizeof(T), [&](ConvAlgorithm a) {
        const std::int64_t in = g.batch * g.in_channels * g.in_plane();
        if (a == ConvAlgorithm::winograd2) {
          winograd_forward<2, float, bfloat16>(g, x, w, data_or_null(bf), y);
        } else if (a == ConvAlgorithm::winograd4) {  // in float: F(4x4)'s transforms are too inexact for bfloat16
          Tensor<float> yf = float_buffer(g.batch * g.out_channels * g.out_plane());
          winograd_forward<4>(g, widen(x, in).data(), widen(w, g.weight_numel()).data(), data_or_null(bf), yf.data());
          narrow(yf, y);
        } else {
          detail::conv2d_forward_gemm_into<T, float, T>(g, x, w, data_or_null(bf), y, blocking);
        }
      }, bf16_conv_products());
      return;
    }
  Tensor<float> yf = float_buffer(g.batch * g.out_channels * g.out_plane());
  conv2d_forward(g, widen(x, g.batch * g.in_channels * g.in_plane()).data(), widen(w, g.weight_numel()).data(),
                 data_or_null(bf), yf.data(), blocking);
  narrow(yf, y);
}
template <class T>
  requires is_reduced_float_v<T>
void conv2d_backward(const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx, T* gw, T* gb,
                     const ConvBlocking& blocking = {}) {
  const std::int64_t in = g.batch * g.in_channels * g.in_plane();
  const bool on_bf16_dot = std::is_same_v<T, bfloat16> && cpu_bf16_gemm_enabled();
  const bool has_work = g.batch > 0 && g.out_channels > 0 && g.out_plane() > 0;
  if constexpr (std::is_same_v<T, bfloat16>)
    if (on_bf16_dot && gx && has_work && winograd_grad_input_applies(g)) {
      run_conv_pass(g, ConvPass::grad_input, sizeof(T), [&](ConvAlgorithm a) {
        const std::int64_t out = g.batch * g.out_channels * g.out_plane();
        if (a == ConvAlgorithm::winograd2) {
          winograd_grad_input<2, float, bfloat16>(g, w, gy, gx);
        } else if (a == ConvAlgorithm::winograd4) {  // in float, as the forward pass
          Tensor<float> gxf = float_buffer(in);
          winograd_grad_input<4, float>(g, widen(w, g.weight_numel()).data(), widen(gy, out).data(), gxf.data());
          narrow(gxf, gx);
        } else if (detail::grad_input_is_convolution(g)) {
          detail::grad_input_by_convolution<T, float, T>(g, w, gy, gx, blocking);
        } else {
          Tensor<float> gxf = float_buffer(in);
          detail::conv2d_backward_gemm<T, float>(g, nullptr, w, gy, gxf.data(), nullptr, nullptr, blocking);
          narrow(gxf, gx);
        }
      }, bf16_conv_products());
      gx = nullptr;
    }
  if (on_bf16_dot && gx && has_work && detail::grad_input_is_convolution(g)) {
    detail::grad_input_by_convolution<T, float, T>(g, w, gy, gx, blocking);
    gx = nullptr;
  }
  Tensor<float> gxf = gx ? float_buffer(in) : Tensor<float>(), gwf = gw ? float_buffer(g.weight_numel()) : Tensor<float>(),
                gbf = gb ? float_buffer(g.out_channels) : Tensor<float>();
  if constexpr (std::is_same_v<T, bfloat16>)
    if (on_bf16_dot && gw && has_work && winograd_applies(g)) {
      run_conv_pass(g, ConvPass::grad_weight, sizeof(T), [&](ConvAlgorithm a) {
        const std::int64_t out = g.batch * g.out_channels * g.out_plane();
        if (a == ConvAlgorithm::winograd2)
          winograd_grad_weight<2, float, bfloat16>(g, x, gy, gwf.data());
        else if (a == ConvAlgorithm::winograd4)  // in float, as the forward pass
          winograd_grad_weight<4>(g, widen(x, in).data(), widen(gy, out).data(), gwf.data());
        else
          detail::conv2d_backward_gemm<T, float>(g, x, nullptr, gy, nullptr, gwf.data(), nullptr, blocking);
      }, bf16_conv_products());
      narrow(gwf, gw);
      gw = nullptr;
      gwf = Tensor<float>();
    }
  if (on_bf16_dot) {
    detail::conv2d_backward_gemm<T, float>(g, x, w, gy, data_or_null(gxf), data_or_null(gwf), data_or_null(gbf),
                                           blocking);
  } else {
    const Tensor<float> xf = widen(gw ? x : nullptr, in), wf = widen(gx ? w : nullptr, g.weight_numel());
    conv2d_backward(g, data_or_null(xf), data_or_null(wf), widen(gy, g.batch * g.out_channels * g.out_plane()).data(),
                    data_or_null(gxf), data_or_null(gwf), data_or_null(gbf), blocking);
  }
  narrow(gxf, gx);
  narrow(gwf, gw);
  narrow(gbf, gb);
}

template <class T>
void conv2d_grad_input(const Conv2dGeometry& g, const T* w, const T* gy, T* gx) {
  conv2d_backward<T>(g, nullptr, w, gy, gx, nullptr, nullptr);
}
template <class T>
void conv2d_grad_weight(const Conv2dGeometry& g, const T* x, const T* gy, T* gw) {
  conv2d_backward<T>(g, x, nullptr, gy, nullptr, gw, nullptr);
}

}  // namespace ptrain::kernels

PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::conv2d_forward)
PTRAIN_PREBUILT_KERNELS_FD(ptrain::kernels::conv2d_backward)
