#pragma once
// The dispatch points of the convolution kernels (autograd/ops/conv.hpp), the executor first:
// CpuExecutor reaches kernels/cpu/conv.hpp and conv_transpose.hpp (batch-split im2col + GEMM),
// any other executor kernels/indexed/conv.hpp. Absent gradients and bias are null pointers.
#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/conv.hpp"
#include "ptrain/kernels/cpu/conv_transpose.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/geometry/conv.hpp"
#include "ptrain/kernels/indexed/conv.hpp"

namespace ptrain::kernels {

template <class T>
void conv2d_forward(const CpuExecutor&, const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y) {
  ProfiledOp profiled("conv_forward");
  conv2d_forward<T>(g, x, w, b, y);
}
template <class Ex, class T>
void conv2d_forward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y) {
  indexed::conv2d_forward<T>(ex, g, x, w, b, y);
}

template <class T>
void conv2d_backward(const CpuExecutor&, const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx, T* gw,
                     T* gb) {
  ProfiledOp profiled("conv_backward");
  conv2d_backward<T>(g, x, w, gy, gx, gw, gb);
}
template <class Ex, class T>
void conv2d_backward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx, T* gw, T* gb) {
  indexed::conv2d_backward<T>(ex, g, x, w, gy, gx, gw, gb);
}

// g is the geometry of the convolution the transposed one is the adjoint of.
template <class T>
void conv_transpose2d_forward(const CpuExecutor&, const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y) {
  ProfiledOp profiled("conv_forward");
  conv_transpose2d_forward<T>(g, x, w, b, y);
}
template <class Ex, class T>
void conv_transpose2d_forward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y) {
  indexed::conv_transpose2d_forward<T>(ex, g, x, w, b, y);
}

template <class T>
void conv_transpose2d_backward(const CpuExecutor&, const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx,
                               T* gw, T* gb) {
  ProfiledOp profiled("conv_backward");
  conv_transpose2d_backward<T>(g, x, w, gy, gx, gw, gb);
}
template <class Ex, class T>
void conv_transpose2d_backward(const Ex& ex, const Conv2dGeometry& g, const T* x, const T* w, const T* gy, T* gx, T* gw,
                               T* gb) {
  indexed::conv_transpose2d_backward<T>(ex, g, x, w, gy, gx, gw, gb);
}

}  // namespace ptrain::kernels
