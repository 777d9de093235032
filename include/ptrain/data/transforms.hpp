#pragma once
// Per-example transforms, as torchvision's: Normalize, RandomCrop (with zero padding),
// RandomHorizontalFlip, Compose. A transform takes one example [C, H, W] that it may overwrite
// or replace (the loader hands it a private copy) and the loader's Rng, seeded per epoch and batch.
// Geometric transforms also take a paired form (x, target_map, rng) that moves a segmentation
// mask [H, W] exactly as the image; an undefined target_map (classification) is left alone.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

template <class T>
concept Transform = std::invocable<const T&, Tensor<float>&, Rng&>;

template <class T>
concept PairedTransform = std::invocable<const T&, Tensor<float>&, Tensor<std::int64_t>&, Rng&>;

// What the loader stores: any Transform, called once per example.
using AnyTransform = std::function<void(Tensor<float>&, Rng&)>;
using AnyPairedTransform = std::function<void(Tensor<float>&, Tensor<std::int64_t>&, Rng&)>;

namespace detail {
// dst[c, r, col] = the zero-padded src at (top + r - padding, left + col - padding).
template <class T>
void pad_crop(const T* src, std::int64_t channels, std::int64_t height, std::int64_t width, T* dst,
              std::int64_t out_height, std::int64_t out_width, std::int64_t top, std::int64_t left,
              std::int64_t padding) {
  const std::int64_t col0 = left - padding;  // source column of output column 0
  const std::int64_t first = std::clamp<std::int64_t>(-col0, 0, out_width);
  const std::int64_t last = std::clamp<std::int64_t>(width - col0, first, out_width);
  for (std::int64_t c = 0; c < channels; ++c) {
    for (std::int64_t r = 0; r < out_height; ++r) {
      T* out = dst + (c * out_height + r) * out_width;
      const std::int64_t row = top + r - padding;
      if (row < 0 || row >= height) {
        std::fill(out, out + out_width, T(0));
        continue;
      }
      std::fill(out, out + first, T(0));
      if (last > first)
        std::memcpy(out + first, src + (c * height + row) * width + col0 + first,
                    static_cast<std::size_t>(last - first) * sizeof(T));
      std::fill(out + last, out + out_width, T(0));
    }
  }
}

template <class T>
void require_chw(const Tensor<T>& x, const char* what) {
  check(x.rank() == 3, what, ": expected one example [C, H, W], got shape ", x.shape());
}

// A target map [H, W] seen as one channel [1, H, W], after checking it fits the image [C, H, W],
// so one geometric kernel serves images and masks.
inline Tensor<std::int64_t> map_as_chw(const Tensor<std::int64_t>& map, const Tensor<float>& x, const char* what) {
  require_chw(x, what);
  check(map.rank() == 2 && map.size(0) == x.size(1) && map.size(1) == x.size(2), what,
        ": expected a target map [H, W] of the image's size ", x.size(1), "x", x.size(2), ", got shape ",
        map.shape());
  return map.reshape(Shape{1, map.size(0), map.size(1)});
}
inline Tensor<std::int64_t> chw_as_map(const Tensor<std::int64_t>& chw) {
  return chw.reshape(Shape{chw.size(1), chw.size(2)});
}

// Calls step on the pair when it has a paired form, else on the image alone (a photometric step).
template <class S>
void apply_paired(const S& step, Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) {
  if constexpr (PairedTransform<S>)
    step(x, map, rng);
  else
    step(x, rng);
}
}  // namespace detail

// Reverses the last dimension (left-right for [C, H, W]) in place.
template <class T>
void hflip(Tensor<T>& x) {
  check(x.rank() >= 1, "hflip: expected a tensor with a width dimension, got shape ", x.shape());
  const std::int64_t width = x.size(-1);
  const std::int64_t rows = width ? x.numel() / width : 0;
  T* p = x.data();
  for (std::int64_t r = 0; r < rows; ++r) std::reverse(p + r * width, p + (r + 1) * width);
}

// The window [top, top + height) x [left, left + width) of x zero-padded by `padding` on each
// side; top and left are in padded coordinates, as in torchvision's RandomCrop.
template <class T>
Tensor<T> pad_crop(const Tensor<T>& x, std::int64_t top, std::int64_t left, std::int64_t height, std::int64_t width,
                   std::int64_t padding = 0) {
  detail::require_chw(x, "pad_crop");
  const std::int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  check(height > 0 && width > 0 && padding >= 0 && top >= 0 && left >= 0 && top + height <= h + 2 * padding &&
            left + width <= w + 2 * padding,
        "pad_crop: window at (", top, ", ", left, ") of ", height, "x", width, " does not fit ", x.shape(),
        " padded by ", padding);
  Tensor<T> out(Shape{c, height, width});
  detail::pad_crop(x.data(), c, h, w, out.data(), height, width, top, left, padding);
  return out;
}

// (x - mean[c]) / std[c] per channel; one value for all channels is allowed.
class Normalize {
 public:
  Normalize(std::vector<float> mean, std::vector<float> stddev)
      : mean_(std::move(mean)), std_(std::move(stddev)) {
    check(!mean_.empty() && mean_.size() == std_.size(),
          "Normalize: expected as many means as deviations, got ", mean_.size(), " and ", std_.size());
    for (std::size_t c = 0; c < std_.size(); ++c)
      check(std_[c] != 0.0f, "Normalize: standard deviation of channel ", c, " is zero");
  }
  void operator()(Tensor<float>& x, Rng&) const {
    detail::require_chw(x, "Normalize");
    const std::int64_t channels = x.size(0);
    check(mean_.size() == 1 || static_cast<std::int64_t>(mean_.size()) == channels, "Normalize: example ",
          x.shape(), " has ", channels, " channels, expected ", mean_.size());
    const std::int64_t plane = x.size(1) * x.size(2);
    float* p = x.data();
    for (std::int64_t c = 0; c < channels; ++c) {
      const std::size_t k = mean_.size() == 1 ? 0 : static_cast<std::size_t>(c);
      const float m = mean_[k], s = std_[k];
      float* q = p + c * plane;
      for (std::int64_t i = 0; i < plane; ++i) q[i] = (q[i] - m) / s;
    }
  }
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& stddev() const { return std_; }

 private:
  std::vector<float> mean_, std_;
};

// A random height x width window of the example zero-padded by `padding` on every side.
class RandomCrop {
 public:
  explicit RandomCrop(std::int64_t size, std::int64_t padding = 0) : RandomCrop(size, size, padding) {}
  RandomCrop(std::int64_t height, std::int64_t width, std::int64_t padding)
      : height_(height), width_(width), padding_(padding) {
    check(height > 0 && width > 0 && padding >= 0,
          "RandomCrop: expected a positive size and padding >= 0, got ", height, "x", width, " padding ",
          padding);
  }
  void operator()(Tensor<float>& x, Rng& rng) const { crop(x, window(x, rng)); }
  // The same window of the image and of its target map (padded with class 0).
  void operator()(Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) const {
    if (!map.defined()) return (*this)(x, rng);
    Tensor<std::int64_t> chw = detail::map_as_chw(map, x, "RandomCrop");
    const auto corner = window(x, rng);
    crop(x, corner);
    crop(chw, corner);
    map = detail::chw_as_map(chw);
  }

 private:
  std::pair<std::int64_t, std::int64_t> window(const Tensor<float>& x, Rng& rng) const {
    detail::require_chw(x, "RandomCrop");
    const std::int64_t ph = x.size(1) + 2 * padding_, pw = x.size(2) + 2 * padding_;
    check(ph >= height_ && pw >= width_, "RandomCrop: example ", x.shape(), " padded by ", padding_, " is ",
          ph, "x", pw, ", smaller than the crop ", height_, "x", width_);
    const auto top = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(ph - height_ + 1)));
    const auto left = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(pw - width_ + 1)));
    return {top, left};
  }
  template <class T>
  void crop(Tensor<T>& x, std::pair<std::int64_t, std::int64_t> corner) const {
    const std::int64_t c = x.size(0), h = x.size(1), w = x.size(2);
    const auto [top, left] = corner;
    if (height_ == h && width_ == w) {
      // Same shape: crop from a per-thread copy of the source back into x, without allocating.
      thread_local std::vector<T> source;
      source.assign(x.data(), x.data() + x.numel());
      detail::pad_crop(source.data(), c, h, w, x.data(), height_, width_, top, left, padding_);
    } else {
      Tensor<T> out(Shape{c, height_, width_});
      detail::pad_crop(x.data(), c, h, w, out.data(), height_, width_, top, left, padding_);
      x = std::move(out);
    }
  }

  std::int64_t height_, width_, padding_;
};

// Flips the example left-right with probability p.
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5) : p_(p) {
    check(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: expected a probability in [0, 1], got ", p);
  }
  void operator()(Tensor<float>& x, Rng& rng) const {
    if (rng.bernoulli(p_)) hflip(x);
  }
  void operator()(Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) const {
    if (map.defined()) detail::map_as_chw(map, x, "RandomHorizontalFlip");
    if (!rng.bernoulli(p_)) return;
    hflip(x);
    if (map.defined()) hflip(map);
  }

 private:
  double p_;
};

// Applies its transforms in order: Compose{RandomCrop(32, 4), RandomHorizontalFlip(), Normalize(m, s)}.
// On a pair, each step takes its paired form if it has one, else the image alone: a step that
// moves pixels must have a paired form, or image and mask part ways.
template <Transform... Ts>
class Compose {
 public:
  Compose(Ts... steps) : steps_(std::move(steps)...) {}
  void operator()(Tensor<float>& x, Rng& rng) const {
    std::apply([&](const auto&... step) { (step(x, rng), ...); }, steps_);
  }
  void operator()(Tensor<float>& x, Tensor<std::int64_t>& map, Rng& rng) const {
    std::apply([&](const auto&... step) { (detail::apply_paired(step, x, map, rng), ...); }, steps_);
  }

 private:
  std::tuple<Ts...> steps_;
};

}  // namespace ptrain
