#pragma once
// The dispatch points of the interpolation kernels (autograd/ops/upsample.hpp), the executor
// first: CpuExecutor reaches kernels/cpu/upsample.hpp, any other executor the gathers of
// kernels/indexed/upsample.hpp (which copy the geometry's taps to the executor's memory).
#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/upsample.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/geometry/upsample.hpp"
#include "ptrain/kernels/indexed/upsample.hpp"

namespace ptrain::kernels {

template <class T>
void interpolate2d_forward(const CpuExecutor&, const Interpolation2d& g, const T* x, T* y) {
  ProfiledOp profiled("upsample");
  interpolate2d_forward(g, x, y);
}
template <class Ex, class T>
void interpolate2d_forward(const Ex& ex, const Interpolation2d& g, const T* x, T* y) {
  indexed::interpolate2d_forward<T>(ex, g, x, y);
}

template <class T>
void interpolate2d_backward(const CpuExecutor&, const Interpolation2d& g, const T* gy, T* gx) {
  ProfiledOp profiled("upsample");
  interpolate2d_backward(g, gy, gx);
}
template <class Ex, class T>
void interpolate2d_backward(const Ex& ex, const Interpolation2d& g, const T* gy, T* gx) {
  indexed::interpolate2d_backward<T>(ex, g, gy, gx);
}

}  // namespace ptrain::kernels
