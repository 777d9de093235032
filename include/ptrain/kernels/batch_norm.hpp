#pragma once
// The dispatch points of batch normalisation (autograd/ops/batch_norm.hpp), the executor first.
// The passes over x (statistics, normalisation, backward) reach kernels/cpu/batch_norm.hpp for
// CpuExecutor and kernels/indexed/batch_norm.hpp for any other executor; the per-channel steps
// (invstd, running statistics, affine gradients) have no tuned CPU kernel and run the indexed
// ones on every executor. The double arrays are in the executor's memory. The forwards take an
// optional residual and relu, and batch_norm_relu_backward is their backward: batch norm + (add +)
// relu fused (autograd/ops/batch_norm.hpp's batch_norm_relu). Weight and bias are of x's type or, beside
// a 16-bit x, float (a 16-bit model's BatchNorm2d keeps them in float).
#include <cstdint>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/batch_norm.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/kernels/indexed/batch_norm.hpp"

namespace ptrain::kernels {

template <class T, class W>
void batch_norm_forward_training(const CpuExecutor&, const T* x, const ChannelLayout& l, const W* weight, const W* bias,
                                 double eps, T* y, double* mean, double* var, const T* residual = nullptr,
                                 bool relu = false) {
  ProfiledOp profiled("batch_norm_forward");
  batch_norm_forward_training(x, l, weight, bias, eps, y, mean, var, residual, relu);
}
template <class Ex, class T, class W>
void batch_norm_forward_training(const Ex& ex, const T* x, const ChannelLayout& l, const W* weight, const W* bias,
                                 double eps, T* y, double* mean, double* var, const T* residual = nullptr,
                                 bool relu = false) {
  indexed::batch_norm_forward_training(ex, x, l, weight, bias, eps, y, mean, var, residual, relu);
}

template <class T, class W>
void batch_norm_forward_inference(const CpuExecutor&, const T* x, const ChannelLayout& l, const W* weight,
                                  const W* bias, const double* mean, const double* invstd, T* y,
                                  const T* residual = nullptr, bool relu = false) {
  ProfiledOp profiled("batch_norm_forward");
  batch_norm_forward_inference(x, l, weight, bias, mean, invstd, y, residual, relu);
}
template <class Ex, class T, class W>
void batch_norm_forward_inference(const Ex& ex, const T* x, const ChannelLayout& l, const W* weight, const W* bias,
                                  const double* mean, const double* invstd, T* y, const T* residual = nullptr,
                                  bool relu = false) {
  indexed::batch_norm_forward_inference(ex, x, l, weight, bias, mean, invstd, y, residual, relu);
}

template <class T, class W>
void batch_norm_backward(const CpuExecutor&, const T* x, const T* gy, const ChannelLayout& l, const W* weight,
                         const double* mean, const double* invstd, bool training, T* gx, double* sum_gy,
                         double* sum_gy_xhat) {
  ProfiledOp profiled("batch_norm_backward");
  batch_norm_backward(x, gy, l, weight, mean, invstd, training, gx, sum_gy, sum_gy_xhat);
}
template <class Ex, class T, class W>
void batch_norm_backward(const Ex& ex, const T* x, const T* gy, const ChannelLayout& l, const W* weight,
                         const double* mean, const double* invstd, bool training, T* gx, double* sum_gy,
                         double* sum_gy_xhat) {
  indexed::batch_norm_backward(ex, x, gy, l, weight, mean, invstd, training, gx, sum_gy, sum_gy_xhat);
}

template <class T, class W>
void batch_norm_relu_backward(const CpuExecutor&, const T* x, const T* y, const T* gy, const ChannelLayout& l,
                              const W* weight, const double* mean, const double* invstd, bool training, T* gx,
                              T* grad_residual, double* sum_gy, double* sum_gy_xhat) {
  ProfiledOp profiled("batch_norm_backward");
  batch_norm_relu_backward(x, y, gy, l, weight, mean, invstd, training, gx, grad_residual, sum_gy, sum_gy_xhat);
}
template <class Ex, class T, class W>
void batch_norm_relu_backward(const Ex& ex, const T* x, const T* y, const T* gy, const ChannelLayout& l,
                              const W* weight, const double* mean, const double* invstd, bool training, T* gx,
                              T* grad_residual, double* sum_gy, double* sum_gy_xhat) {
  indexed::batch_norm_relu_backward(ex, x, y, gy, l, weight, mean, invstd, training, gx, grad_residual, sum_gy,
                                    sum_gy_xhat);
}

template <class T>
void batch_norm_moments(const CpuExecutor&, const T* x, const ChannelLayout& l, double* mean, double* var) {
  ProfiledOp profiled("batch_norm_forward");
  batch_norm_moments(x, l, mean, var);
}
template <class Ex, class T>
void batch_norm_moments(const Ex& ex, const T* x, const ChannelLayout& l, double* mean, double* var) {
  indexed::batch_norm_moments(ex, x, l, mean, var);
}

template <class T>
void batch_norm_backward_sums(const CpuExecutor&, const T* x, const T* gy, const ChannelLayout& l, const double* mean,
                              double* sum_gy, double* sum_gy_xmu) {
  ProfiledOp profiled("batch_norm_backward");
  batch_norm_backward_sums(x, gy, l, mean, sum_gy, sum_gy_xmu);
}
template <class Ex, class T>
void batch_norm_backward_sums(const Ex& ex, const T* x, const T* gy, const ChannelLayout& l, const double* mean,
                              double* sum_gy, double* sum_gy_xmu) {
  indexed::batch_norm_backward_sums(ex, x, gy, l, mean, sum_gy, sum_gy_xmu);
}

template <class T, class W>
void batch_norm_backward_input(const CpuExecutor&, const T* x, const T* gy, const ChannelLayout& l, const W* weight,
                               const double* mean, const double* invstd, const double* sum_gy, const double* sum_gy_xmu,
                               double count, T* gx) {
  ProfiledOp profiled("batch_norm_backward");
  batch_norm_backward_input(x, gy, l, weight, mean, invstd, sum_gy, sum_gy_xmu, count, gx);
}
template <class Ex, class T, class W>
void batch_norm_backward_input(const Ex& ex, const T* x, const T* gy, const ChannelLayout& l, const W* weight,
                               const double* mean, const double* invstd, const double* sum_gy, const double* sum_gy_xmu,
                               double count, T* gx) {
  indexed::batch_norm_backward_input(ex, x, gy, l, weight, mean, invstd, sum_gy, sum_gy_xmu, count, gx);
}

using indexed::batch_norm_affine_grads;
using indexed::batch_norm_invstd;
using indexed::batch_norm_running_statistics;
using indexed::batch_norm_update_running;

}  // namespace ptrain::kernels
