#pragma once
// conv2d and conv_transpose2d written once for HostExecutor and CudaExecutor (kernels/executor.hpp),
// on the Conv2dGeometry of kernels/geometry/conv.hpp: im2col (a thread per column entry) and GEMMs
// over chunks of images; col2im is a gather (a thread per input pixel), so no atomics.
#include <algorithm>
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/geometry/conv.hpp"
#include "ptrain/kernels/indexed.hpp"

namespace ptrain::kernels::indexed {

// Elements of the column buffer (col_rows x images x out_plane) a chunk of images may use: 128 MiB
// of floats. The GEMMs get all the images that fit; a larger image still goes alone.
inline constexpr std::int64_t default_column_budget = std::int64_t{1} << 25;

inline std::int64_t images_per_chunk(const Conv2dGeometry& g, std::int64_t column_budget) {
  const std::int64_t per_image = std::max<std::int64_t>(1, g.col_rows() * g.out_plane());
  return std::clamp<std::int64_t>(column_budget / per_image, 1, std::max<std::int64_t>(1, g.batch));
}

template <class T>
struct FillZero {
  T* out;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const { out[i] = from_accumulate<T>(accumulate_t<T>(0)); }
};

// col[(c*kh + i)*kw + j][m*P + p] = x[m][c][oh*sh - ph + i*dh][ow*sw - pw + j*dw], zero in the
// padding, for the `images` images from x (P = OH*OW, p = oh*OW + ow).
template <class T>
struct Im2col {
  Conv2dGeometry g;
  const T* x;
  T* col;
  std::int64_t images;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    const std::int64_t P = g.out_h * g.out_w, cols = images * P;
    const std::int64_t r = e / cols, q = e - r * cols;
    const std::int64_t m = q / P, p = q - m * P;
    const std::int64_t oh = p / g.out_w, ow = p - oh * g.out_w;
    const std::int64_t j = r % g.kernel_w, ci = r / g.kernel_w;
    const std::int64_t i = ci % g.kernel_h, c = ci / g.kernel_h;
    const std::int64_t ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
    const std::int64_t iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
    col[e] = ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w
                 ? x[((m * g.in_channels + c) * g.in_h + ih) * g.in_w + iw]
                 : from_accumulate<T>(accumulate_t<T>(0));
  }
};

// The adjoint of Im2col as a gather: gx[m][c][ih][iw] = the sum of the column entries that read
// it, in the order (i, j) of kernels::col2im. Writes every pixel of the `images` images.
template <class T>
struct Col2imGather {
  Conv2dGeometry g;
  const T* col;
  T* gx;
  std::int64_t images;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    const std::int64_t P = g.out_h * g.out_w, cols = images * P;
    const std::int64_t iw = e % g.in_w, t = e / g.in_w;
    const std::int64_t ih = t % g.in_h, mc = t / g.in_h;
    const std::int64_t c = mc % g.in_channels, m = mc / g.in_channels;
    accumulate_t<T> sum(0);
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      const std::int64_t hh = ih + g.pad_h - i * g.dilation_h;  // oh * sh
      if (hh < 0) break;
      const std::int64_t oh = hh / g.stride_h;
      if (oh * g.stride_h != hh || oh >= g.out_h) continue;
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        const std::int64_t ww = iw + g.pad_w - j * g.dilation_w;
        if (ww < 0) break;
        const std::int64_t ow = ww / g.stride_w;
        if (ow * g.stride_w != ww || ow >= g.out_w) continue;
        sum += to_accumulate(col[((c * g.kernel_h + i) * g.kernel_w + j) * cols + m * P + oh * g.out_w + ow]);
      }
    }
    gx[e] = from_accumulate<T>(sum);
  }
};

// dst[k][m*plane + p] = src[m][k][p]: a chunk of images' channels side by side as GEMM rows.
template <class T>
struct ImagesToColumns {
  const T* src;
  T* dst;
  std::int64_t images, channels, plane;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    const std::int64_t cols = images * plane;
    const std::int64_t k = e / cols, q = e - k * cols;
    const std::int64_t m = q / plane, p = q - m * plane;
    dst[e] = src[(m * channels + k) * plane + p];
  }
};

// The inverse, plus a bias per channel (bias may be null): dst[m][k][p] = src[k][m*plane + p] + bias[k].
template <class T>
struct ColumnsToImages {
  const T* src;
  const T* bias;
  T* dst;
  std::int64_t images, channels, plane;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    const std::int64_t p = e % plane, mk = e / plane;
    const std::int64_t k = mk % channels, m = mk / channels;
    accumulate_t<T> v = to_accumulate(src[(k * images + m) * plane + p]);
    if (bias) v += to_accumulate(bias[k]);
    dst[e] = from_accumulate<T>(v);
  }
};

// y[n][k][p] += bias[k] in place.
template <class T>
struct AddChannelBias {
  T* y;
  const T* bias;
  std::int64_t channels, plane;

  PTRAIN_HOST_DEVICE void operator()(std::int64_t e) const {
    y[e] = from_accumulate<T>(to_accumulate(y[e]) + to_accumulate(bias[(e / plane) % channels]));
  }
};

// out[k] = the sum over images and pixels of x[n][k][p], in double as kernels::conv2d_grad_bias.
template <class T>
struct ChannelSums : SumReduction<double> {
  const T* x;
  T* out;
  std::int64_t channels, plane;

  PTRAIN_HOST_DEVICE double term(std::int64_t k, std::int64_t j) const {
    const std::int64_t n = j / plane, p = j - n * plane;
    return static_cast<double>(to_accumulate(x[(n * channels + k) * plane + p]));
  }
  PTRAIN_HOST_DEVICE void finish(std::int64_t k, double total) const {
    out[k] = from_accumulate<T>(static_cast<accumulate_t<T>>(total));
  }
};

template <class T, class Ex>
void fill_zero(const Ex& ex, T* out, std::int64_t n) {
  ex.indexed(n, FillZero<T>{out});
}

// gy [batch, channels, plane] summed per channel into out [channels].
template <class T, class Ex>
void channel_sums(const Ex& ex, std::int64_t batch, std::int64_t channels, std::int64_t plane, const T* gy, T* out) {
  ex.row_reduction(channels, batch * plane, ChannelSums<T>{{}, gy, out, channels, plane});
}

// Mirrors kernels::conv2d_forward: y[N, K, OH, OW] = conv(x, w) + b[K] (b may be null).
template <class T, class Ex>
void conv2d_forward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                    std::int64_t column_budget = default_column_budget) {
  const std::int64_t K = g.out_channels, P = g.out_plane(), G = g.groups, Kg = K / G, Rg = g.group_rows();
  const std::int64_t in_image = g.in_channels * g.in_plane(), out_image = K * P;
  if (g.batch == 0 || K == 0 || P == 0) return;
  check(x && w && y, "conv2d_forward: input, weight and output must not be null");
  const std::int64_t chunk = images_per_chunk(g, column_budget);
  const bool pointwise = g.is_pointwise() && chunk == 1;  // the image is its own column matrix
  auto col = ex.template buffer<T>(pointwise ? 0 : g.col_rows() * chunk * P);
  auto out = ex.template buffer<T>(chunk > 1 ? K * chunk * P : 0);
  for (std::int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
    const std::int64_t images = std::min(chunk, g.batch - n0), cols = images * P;
    const T* B = x + n0 * in_image;
    if (!pointwise) {
      ex.indexed(g.col_rows() * cols, Im2col<T>{g, B, col.data(), images});
      B = col.data();
    }
    T* y0 = y + n0 * out_image;
    T* C = images == 1 ? y0 : out.data();  // one image: [K, P] is already y's layout
    for (std::int64_t grp = 0; grp < G; ++grp)
      ex.template gemm<T>(false, false, Kg, cols, Rg, 1, w + grp * Kg * Rg, Rg, B + grp * Rg * cols, cols, 0,
                          C + grp * Kg * cols, cols);
    if (images > 1)
      ex.indexed(images * out_image, ColumnsToImages<T>{C, b, y0, images, K, P});
    else if (b)
      ex.indexed(out_image, AddChannelBias<T>{y0, b, K, P});
  }
}

// Mirrors kernels::conv2d_backward: writes gx, gw and gb from gy; any of them may be null. gw
// sums the chunks' GEMMs in T (for half and bfloat16 rounded once per chunk of images).
template <class T, class Ex>
void conv2d_backward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx, T* gw, T* gb,
                     std::int64_t column_budget = default_column_budget) {
  const std::int64_t K = g.out_channels, P = g.out_plane(), G = g.groups, Kg = K / G, Rg = g.group_rows();
  const std::int64_t in_image = g.in_channels * g.in_plane(), out_image = K * P;
  const bool empty = g.batch == 0 || K == 0 || P == 0;
  check(empty || !(gx || gw || gb) || gy, "conv2d_backward: gy must not be null");
  check(empty || !gx || w, "conv2d_backward: the input gradient needs the weight");
  check(empty || !gw || x, "conv2d_backward: the weight gradient needs the input");
  if (gb) channel_sums(ex, g.batch, K, P, gy, gb);
  if (!gx && !gw) return;
  if (empty) {
    if (gx) fill_zero(ex, gx, g.batch * in_image);
    if (gw) fill_zero(ex, gw, g.weight_numel());
    return;
  }
  const std::int64_t chunk = images_per_chunk(g, column_budget);
  const bool pointwise = g.is_pointwise() && chunk == 1;
  auto col = ex.template buffer<T>(pointwise ? 0 : g.col_rows() * chunk * P);
  auto gathered = ex.template buffer<T>(chunk > 1 ? K * chunk * P : 0);
  for (std::int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
    const std::int64_t images = std::min(chunk, g.batch - n0), cols = images * P;
    const T* Gy = gy + n0 * out_image;  // [K, cols]
    if (images > 1) {
      ex.indexed(K * cols, ImagesToColumns<T>{Gy, gathered.data(), images, K, P});
      Gy = gathered.data();
    }
    if (gw) {
      const T* B = x + n0 * in_image;
      if (!pointwise) {
        ex.indexed(g.col_rows() * cols, Im2col<T>{g, B, col.data(), images});
        B = col.data();
      }
      for (std::int64_t grp = 0; grp < G; ++grp)
        ex.template gemm<T>(false, true, Kg, Rg, cols, 1, Gy + grp * Kg * cols, cols, B + grp * Rg * cols, cols,
                            n0 == 0 ? 0 : 1, gw + grp * Kg * Rg, Rg);
    }
    if (!gx) continue;
    T* gx0 = gx + n0 * in_image;
    T* C = pointwise ? gx0 : col.data();
    for (std::int64_t grp = 0; grp < G; ++grp)
      ex.template gemm<T>(true, false, Rg, cols, Kg, 1, w + grp * Kg * Rg, Rg, Gy + grp * Kg * cols, cols, 0,
                          C + grp * Rg * cols, cols);
    if (!pointwise) ex.indexed(images * in_image, Col2imGather<T>{g, col.data(), gx0, images});
  }
}

// Mirror kernels::conv2d_grad_input, conv2d_grad_weight and conv2d_grad_bias.
template <class T, class Ex>
void conv2d_grad_input(const Ex& ex, const Conv2dGeometry& g, const T* w, const T* gy, T* gx,
                       std::int64_t column_budget = default_column_budget) {
  conv2d_backward<T>(ex, g, nullptr, w, gy, gx, nullptr, nullptr, column_budget);
}
template <class T, class Ex>
void conv2d_grad_weight(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* gy, T* gw,
                        std::int64_t column_budget = default_column_budget) {
  conv2d_backward<T>(ex, g, x, nullptr, gy, nullptr, gw, nullptr, column_budget);
}
template <class T, class Ex>
void conv2d_grad_bias(const Ex& ex, const Conv2dGeometry& g, const T* gy, T* gb) {
  channel_sums(ex, g.batch, g.out_channels, g.out_plane(), gy, gb);
}

// Mirrors kernels::conv_transpose2d_forward (g from make_conv_transpose2d_geometry: g.in_*
// describe the output): y = the input gradient of g's convolution for gy = x, plus b per channel.
template <class T, class Ex>
void conv_transpose2d_forward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                              std::int64_t column_budget = default_column_budget) {
  conv2d_grad_input<T>(ex, g, w, x, y, column_budget);
  if (b) ex.indexed(g.batch * g.in_channels * g.in_plane(), AddChannelBias<T>{y, b, g.in_channels, g.in_plane()});
}

// Mirrors kernels::conv_transpose2d_backward: gx is g's forward of gy, gw g's weight gradient
// with the roles of input and output swapped, gb the per-channel sums of gy.
template <class T, class Ex>
void conv_transpose2d_backward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx,
                               T* gw, T* gb, std::int64_t column_budget = default_column_budget) {
  if (gx) conv2d_forward<T>(ex, g, gy, w, nullptr, gx, column_budget);
  if (gw) conv2d_grad_weight<T>(ex, g, gy, x, gw, column_budget);
  if (gb) channel_sums(ex, g.batch, g.in_channels, g.in_plane(), gy, gb);
}

}  // namespace ptrain::kernels::indexed
