#pragma once
// LossScaler: the loss scale of fp16 training, by Apex's dynamic rule (apex/amp/scaler.py): start at
// 2^16; a step whose gradients overflow is skipped and halves the scale; scale_window steps in a
// row without overflow double it, up to max_loss_scale. Where Apex would halve below
// min_loss_scale, this stops with an error instead of skipping steps for ever.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "ptrain/core/error.hpp"

namespace ptrain {

struct LossScalerOptions {
  double initial_scale = 65536.0;       // 2^16, as Apex and torch.cuda.amp.GradScaler
  int scale_window = 2000;              // steps without overflow before the scale doubles
  double min_loss_scale = 1.0 / 65536;  // an overflow at this scale is an error (Apex: no floor)
  double max_loss_scale = 16777216.0;   // 2^24, Apex's cap on growth
  bool dynamic = true;                  // false: the scale stays initial_scale (Apex's static loss_scale)
};

// Python's repr of a float ("32768.0", "0.5", "6.103515625e-05"): how Apex prints a loss scale.
inline std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::scientific).ptr;
  const std::string sci(buffer, end);  // shortest round trip: "-3.2768e+04"
  const auto e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  if (exponent < -4 || exponent >= 16) return sci;  // Python's repr switches to scientific there
  const bool negative = sci[0] == '-';
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c >= '0' && c <= '9') digits.push_back(c);
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto whole = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() < whole) digits.append(whole - digits.size(), '0');
    out = digits.substr(0, whole) + "." + (digits.size() > whole ? digits.substr(whole) : "0");
  }
  return negative ? "-" + out : out;
}

// The error of an overflow at the minimum loss scale: the Trainer catches it to add the step and
// the first parameter whose gradient is not finite.
class LossScaleUnderflow : public Error {
 public:
  using Error::Error;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {}) : options_(options), scale_(options.initial_scale) {
    const auto& o = options_;
    check(std::isfinite(o.initial_scale) && o.initial_scale > 0, "LossScaler: initial_scale must be a positive number, got ",
          o.initial_scale);
    check(o.scale_window >= 1, "LossScaler: scale_window must be at least 1, got ", o.scale_window);
    check(o.min_loss_scale > 0 && o.min_loss_scale <= o.initial_scale && o.initial_scale <= o.max_loss_scale,
          "LossScaler: expected 0 < min_loss_scale <= initial_scale <= max_loss_scale, got ", o.min_loss_scale, ", ",
          o.initial_scale, ", ", o.max_loss_scale);
  }

  double scale() const { return scale_; }
  bool dynamic() const { return options_.dynamic; }
  const LossScalerOptions& options() const { return options_; }
  // Steps since the last overflow or growth (Apex's _unskipped).
  int clean_steps() const { return clean_steps_; }

  // Resumes a saved run: the scale and the clean steps since the last change, as scale() and
  // clean_steps() gave them.
  void restore(double scale, int clean_steps) {
    check(std::isfinite(scale) && scale >= options_.min_loss_scale && scale <= options_.max_loss_scale,
          "LossScaler: a saved loss scale of ", scale, " is outside [min_loss_scale, max_loss_scale] = [",
          options_.min_loss_scale, ", ", options_.max_loss_scale, "]");
    check(clean_steps >= 0 && clean_steps < options_.scale_window, "LossScaler: saved clean steps ", clean_steps,
          " outside [0, scale_window ", options_.scale_window, ")");
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

  // Records one step: overflow means its gradients held an inf or NaN (and the step was skipped).
  void update(bool overflow) {
    if (!options_.dynamic) return;
    if (overflow) {
      const double next = scale_ / 2;
      if (next < options_.min_loss_scale)
        throw LossScaleUnderflow(detail::concat(
            "LossScaler: the gradients overflowed (inf or NaN) at loss scale ", python_float(scale_),
            ", and halving it would go below min_loss_scale ", python_float(options_.min_loss_scale),
            ". The loss, the weights or the inputs are probably inf or NaN already (a learning rate too high?); "
            "otherwise lower LossScalerOptions::min_loss_scale"));
      scale_ = next;
      clean_steps_ = 0;
      return;
    }
    if (++clean_steps_ == options_.scale_window) {
      scale_ = std::min(options_.max_loss_scale, scale_ * 2);
      clean_steps_ = 0;
    }
  }

 private:
  LossScalerOptions options_;
  double scale_;
  int clean_steps_ = 0;
};

}  // namespace ptrain
