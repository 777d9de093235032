#pragma once
// The parameter-free layers: activations, pooling, dropout, flatten, upsampling.
#include <string>

#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/ops/dropout.hpp"
#include "ptrain/autograd/ops/pool.hpp"
#include "ptrain/autograd/ops/upsample.hpp"
#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

template <class T = float, class D = Cpu>
class ReLU : public Module<T, D> {
 public:
  Var<T, D> forward(const Var<T, D>& x) override { return relu(x); }
};

template <class T = float, class D = Cpu>
class Sigmoid : public Module<T, D> {
 public:
  Var<T, D> forward(const Var<T, D>& x) override { return sigmoid(x); }
};

template <class T = float, class D = Cpu>
class Flatten : public Module<T, D> {
 public:
  explicit Flatten(int start_dim = 1) : start_dim_(start_dim) {}
  Var<T, D> forward(const Var<T, D>& x) override { return flatten(x, start_dim_); }

 private:
  int start_dim_;
};

template <class T = float, class D = Cpu>
class Dropout : public Module<T, D> {
 public:
  explicit Dropout(double p = 0.5, Rng* rng = nullptr) : p_(p), rng_(rng ? rng : &global_rng()) {
    check(p >= 0 && p <= 1, "Dropout: p=", p, " is not a probability");
  }
  Var<T, D> forward(const Var<T, D>& x) override { return dropout(x, p_, this->is_training(), *rng_); }

 private:
  double p_;
  Rng* rng_;
};

enum class PoolKind { max, average };

// nn.MaxPool2d / nn.AvgPool2d: square windows with stride defaulting to the kernel size, or any
// Pool2dOptions (ceil_mode, rectangular windows).
template <class T, PoolKind kind, class D = Cpu>
class Pool2d : public Module<T, D> {
 public:
  explicit Pool2d(std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0)
      : Pool2d(Pool2dOptions::square(kernel, stride, padding)) {}
  explicit Pool2d(const Pool2dOptions& options) : options_(options) {}
  Var<T, D> forward(const Var<T, D>& x) override {
    if constexpr (kind == PoolKind::max) return max_pool2d(x, options_);
    else return avg_pool2d(x, options_);
  }
  std::string type_name() const override { return kind == PoolKind::max ? "MaxPool2d" : "AvgPool2d"; }
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

template <class T = float, class D = Cpu>
using MaxPool2d = Pool2d<T, PoolKind::max, D>;
template <class T = float, class D = Cpu>
using AvgPool2d = Pool2d<T, PoolKind::average, D>;

template <class T = float, class D = Cpu>
class AdaptiveAvgPool2d : public Module<T, D> {
 public:
  AdaptiveAvgPool2d(std::int64_t out_h, std::int64_t out_w) : out_h_(out_h), out_w_(out_w) {}
  explicit AdaptiveAvgPool2d(std::int64_t out) : AdaptiveAvgPool2d(out, out) {}
  Var<T, D> forward(const Var<T, D>& x) override { return adaptive_avg_pool2d(x, out_h_, out_w_); }

 private:
  std::int64_t out_h_, out_w_;
};

// nn.Upsample: Upsample<T>(2.0) doubles H and W by repeating pixels;
// Upsample<T>(UpsampleOptions::by_scale(2.0, UpsampleMode::bilinear)) interpolates.
template <class T = float, class D = Cpu>
class Upsample : public Module<T, D> {
 public:
  explicit Upsample(const UpsampleOptions& options) : options_(options) { check_upsample_options(options_); }
  explicit Upsample(double scale_factor, UpsampleMode mode = UpsampleMode::nearest, bool align_corners = false)
      : Upsample(UpsampleOptions::by_scale(scale_factor, mode, align_corners)) {}
  Var<T, D> forward(const Var<T, D>& x) override { return upsample(x, options_); }
  const UpsampleOptions& options() const { return options_; }

 private:
  UpsampleOptions options_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::ReLU)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::Sigmoid)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::Flatten)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::Dropout)
PTRAIN_PREBUILT_CLASS(ptrain::Pool2d<float, ptrain::PoolKind::max, ptrain::Cpu>)
PTRAIN_PREBUILT_CLASS(ptrain::Pool2d<double, ptrain::PoolKind::max, ptrain::Cpu>)
PTRAIN_PREBUILT_CLASS(ptrain::Pool2d<float, ptrain::PoolKind::average, ptrain::Cpu>)
PTRAIN_PREBUILT_CLASS(ptrain::Pool2d<double, ptrain::PoolKind::average, ptrain::Cpu>)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::AdaptiveAvgPool2d)
PTRAIN_PREBUILT_CLASSES_FD(ptrain::Upsample)
