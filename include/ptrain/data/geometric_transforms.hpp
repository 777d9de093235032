#pragma once
// Geometric transforms of [C, H, W] examples, each with the paired form that moves a segmentation
// mask [H, W] the same way: Resize (bilinear as torch's F.interpolate with align_corners=False and
// no antialias; masks nearest), CenterCrop, RandomVerticalFlip, RandomRotation90 (torch.rot90).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/data/transforms.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

namespace detail {
// Output index i of a linear resize reads src[i0] * w0 + src[i1] * w1.
struct LinearTap {
  std::int64_t i0, i1;
  float w0, w1;
};

// torch's source index (i + 0.5) * in / out - 0.5, clamped at 0, in float as torch computes it for
// float tensors; the upper neighbour is clamped to the last row or column.
inline std::vector<LinearTap> linear_taps(std::int64_t in, std::int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<LinearTap> taps(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i) {
    const float src = std::max(scale * (static_cast<float>(i) + 0.5f) - 0.5f, 0.0f);
    const auto i0 = static_cast<std::int64_t>(src);
    const float w1 = std::min(src - static_cast<float>(i0), 1.0f);
    taps[static_cast<std::size_t>(i)] = {i0, i0 + (i0 < in - 1 ? 1 : 0), 1.0f - w1, w1};
  }
  return taps;
}

// torch's mode='nearest': floor(i * in / out) in float, at most in - 1.
inline std::vector<std::int64_t> nearest_taps(std::int64_t in, std::int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<std::int64_t> taps(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i)
    taps[static_cast<std::size_t>(i)] =
        std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(i) * scale)), in - 1);
  return taps;
}

inline void require_size(std::int64_t height, std::int64_t width, const char* what) {
  check(height > 0 && width > 0, what, ": expected a positive size, got ", height, "x", width);
}

template <class T>
void require_resizable(const Tensor<T>& x, std::int64_t height, std::int64_t width, const char* what) {
  require_chw(x, what);
  require_size(height, width, what);
  check(x.size(1) > 0 && x.size(2) > 0, what, ": cannot resize an empty image ", x.shape());
}
}  // namespace detail

// F.interpolate(x[None], size=(height, width), mode='bilinear', align_corners=False)[0].
inline Tensor<float> resize_bilinear(const Tensor<float>& x, std::int64_t height, std::int64_t width) {
  detail::require_resizable(x, height, width, "resize_bilinear");
  const std::int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  const auto rows = detail::linear_taps(h, height), cols = detail::linear_taps(w, width);
  Tensor<float> out(Shape{c, height, width});
  const float* src = x.data();
  float* dst = out.data();
  for (std::int64_t k = 0; k < c; ++k)
    for (const auto& r : rows) {
      const float* top = src + (k * h + r.i0) * w;
      const float* bottom = src + (k * h + r.i1) * w;
      for (const auto& q : cols)
        *dst++ = r.w0 * (q.w0 * top[q.i0] + q.w1 * top[q.i1]) + r.w1 * (q.w0 * bottom[q.i0] + q.w1 * bottom[q.i1]);
    }
  return out;
}

// F.interpolate(x[None], size=(height, width), mode='nearest')[0]: what masks are resized with.
template <class T>
Tensor<T> resize_nearest(const Tensor<T>& x, std::int64_t height, std::int64_t width) {
  detail::require_resizable(x, height, width, "resize_nearest");
  const std::int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  const auto rows = detail::nearest_taps(h, height), cols = detail::nearest_taps(w, width);
  Tensor<T> out(Shape{c, height, width});
  T* dst = out.data();
  for (std::int64_t k = 0; k < c; ++k)
    for (const auto r : rows) {
      const T* row = x.data() + (k * h + r) * w;
      for (const auto q : cols) *dst++ = row[q];
    }
  return out;
}

// torchvision's center_crop: the window starts at round((H - height) / 2) (half to even, as
// Python's round), and a crop larger than the image is zero-padded around it.
template <class T>
Tensor<T> center_crop(const Tensor<T>& x, std::int64_t height, std::int64_t width) {
  detail::require_chw(x, "center_crop");
  detail::require_size(height, width, "center_crop");
  const std::int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  const auto start = [](std::int64_t size, std::int64_t crop) {
    return crop > size ? -((crop - size) / 2)
                       : static_cast<std::int64_t>(std::nearbyint(static_cast<double>(size - crop) / 2.0));
  };
  Tensor<T> out(Shape{c, height, width});
  detail::pad_crop(x.data(), c, h, w, out.data(), height, width, start(h, height), start(w, width), 0);
  return out;
}

// Reverses the rows of each channel (upside down) in place.
template <class T>
void vflip(Tensor<T>& x) {
  detail::require_chw(x, "vflip");
  const std::int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  T* p = x.data();
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t r = 0; r < h / 2; ++r)
      std::swap_ranges(p + (k * h + r) * w, p + (k * h + r + 1) * w, p + (k * h + h - 1 - r) * w);
}

// torch.rot90(x, k, dims=[1, 2]): k quarter turns counter-clockwise; odd k swaps H and W.
template <class T>
Tensor<T> rot90(const Tensor<T>& x, int k) {
  detail::require_chw(x, "rot90");
  const std::int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  const int turns = ((k % 4) + 4) % 4;
  const bool odd = turns % 2 == 1;
  const std::int64_t oh = odd ? w : h, ow = odd ? h : w;
  Tensor<T> out(Shape{c, oh, ow});
  const T* src = x.data();
  T* dst = out.data();
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        std::int64_t r = i, col = j;  // turns == 0
        if (turns == 1) r = j, col = w - 1 - i;
        if (turns == 2) r = h - 1 - i, col = w - 1 - j;
        if (turns == 3) r = h - 1 - j, col = i;
        *dst++ = src[(ch * h + r) * w + col];
      }
  return out;
}

// torchvision's Resize: to height x width, or with one size the shorter side to it, the longer
// one to floor(size * long / short). Images bilinear, target maps nearest.
class Resize {
 public:
  explicit Resize(std::int64_t shorter_side) : height_(shorter_side), width_(0) {
    detail::require_size(shorter_side, shorter_side, "Resize");
  }
  Resize(std::int64_t height, std::int64_t width) : height_(height), width_(width) {
    detail::require_size(height, width, "Resize");
  }
  void operator()(Tensor<float>& x, Rng&) const {
    detail::require_chw(x, "Resize");
    const auto [h, w] = output_size(x.size(1), x.size(2));
    x = resize_bilinear(x, h, w);
  }
  void operator()(Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) const {
    if (map.defined()) {
      const auto [h, w] = output_size(x.size(1), x.size(2));
      map = detail::chw_as_map(resize_nearest(detail::map_as_chw(map, x, "Resize"), h, w));
    }
    (*this)(x, rng);
  }
  std::pair<std::int64_t, std::int64_t> output_size(std::int64_t h, std::int64_t w) const {
    if (width_ > 0) return {height_, width_};
    const std::int64_t shorter = std::min(h, w), longer = std::max(h, w);
    const auto other = static_cast<std::int64_t>(static_cast<double>(height_ * longer) / static_cast<double>(shorter));
    return h <= w ? std::pair{height_, other} : std::pair{other, height_};
  }

 private:
  std::int64_t height_, width_;  // width_ 0: height_ is the shorter side
};

class CenterCrop {
 public:
  explicit CenterCrop(std::int64_t size) : CenterCrop(size, size) {}
  CenterCrop(std::int64_t height, std::int64_t width) : height_(height), width_(width) {
    detail::require_size(height, width, "CenterCrop");
  }
  void operator()(Tensor<float>& x, Rng&) const { x = center_crop(x, height_, width_); }
  void operator()(Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) const {
    if (map.defined()) map = detail::chw_as_map(center_crop(detail::map_as_chw(map, x, "CenterCrop"), height_, width_));
    (*this)(x, rng);
  }

 private:
  std::int64_t height_, width_;
};

// Flips the example upside down with probability p.
class RandomVerticalFlip {
 public:
  explicit RandomVerticalFlip(double p = 0.5) : p_(p) {
    check(p >= 0.0 && p <= 1.0, "RandomVerticalFlip: expected a probability in [0, 1], got ", p);
  }
  void operator()(Tensor<float>& x, Rng& rng) const {
    detail::require_chw(x, "RandomVerticalFlip");
    if (rng.bernoulli(p_)) vflip(x);
  }
  void operator()(Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) const {
    Tensor<std::int64_t> chw = map.defined() ? detail::map_as_chw(map, x, "RandomVerticalFlip") : map;
    if (!rng.bernoulli(p_)) return;
    vflip(x);
    if (chw.defined()) vflip(chw);  // a view of map's storage
  }

 private:
  double p_;
};

// Turns the example by k quarter turns, k uniform in {0, 1, 2, 3} (non-square images swap H, W).
class RandomRotation90 {
 public:
  void operator()(Tensor<float>& x, Rng& rng) const { x = rot90(x, draw(rng)); }
  void operator()(Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) const {
    if (!map.defined()) return (*this)(x, rng);
    const int k = draw(rng);
    map = detail::chw_as_map(rot90(detail::map_as_chw(map, x, "RandomRotation90"), k));
    x = rot90(x, k);
  }

 private:
  static int draw(Rng& rng) { return static_cast<int>(rng.below(4)); }
};

}  // namespace ptrain
