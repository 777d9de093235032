#pragma once
// The dispatch points of the pooling kernels (autograd/ops/pool.hpp), the executor first:
// CpuExecutor reaches kernels/cpu/pool.hpp, any other executor kernels/indexed/pool.hpp.
#include <cstdint>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/pool.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/geometry/pool.hpp"
#include "ptrain/kernels/indexed/pool.hpp"

namespace ptrain::kernels {

template <class T, class Index>
void max_pool2d_forward(const CpuExecutor&, const Pool2dGeometry& g, const T* x, T* y, Index* index) {
  ProfiledOp profiled("pool_forward");
  max_pool2d_forward(g, x, y, index);
}
template <class Ex, class T, class Index>
void max_pool2d_forward(const Ex& ex, const Pool2dGeometry& g, const T* x, T* y, Index* index) {
  indexed::max_pool2d_forward(ex, g, x, y, index);
}

template <class T, class Index>
void max_pool2d_backward(const CpuExecutor&, const Pool2dGeometry& g, const T* gy, const Index* index, T* gx) {
  ProfiledOp profiled("pool_backward");
  max_pool2d_backward(g, gy, index, gx);
}
template <class Ex, class T, class Index>
void max_pool2d_backward(const Ex& ex, const Pool2dGeometry& g, const T* gy, const Index* index, T* gx) {
  indexed::max_pool2d_backward(ex, g, gy, index, gx);
}

template <class T>
void avg_pool2d_forward(const CpuExecutor&, const Pool2dGeometry& g, const T* x, T* y) {
  ProfiledOp profiled("pool_forward");
  avg_pool2d_forward(g, x, y);
}
template <class Ex, class T>
void avg_pool2d_forward(const Ex& ex, const Pool2dGeometry& g, const T* x, T* y) {
  indexed::avg_pool2d_forward(ex, g, x, y);
}

template <class T>
void avg_pool2d_backward(const CpuExecutor&, const Pool2dGeometry& g, const T* gy, T* gx) {
  ProfiledOp profiled("pool_backward");
  avg_pool2d_backward(g, gy, gx);
}
template <class Ex, class T>
void avg_pool2d_backward(const Ex& ex, const Pool2dGeometry& g, const T* gy, T* gx) {
  indexed::avg_pool2d_backward(ex, g, gy, gx);
}

template <class T>
void adaptive_avg_pool2d_forward(const CpuExecutor&, std::int64_t planes, std::int64_t H, std::int64_t W,
                                 std::int64_t OH, std::int64_t OW, const T* x, T* y) {
  ProfiledOp profiled("pool_forward");
  adaptive_avg_pool2d_forward(planes, H, W, OH, OW, x, y);
}
template <class Ex, class T>
void adaptive_avg_pool2d_forward(const Ex& ex, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                 std::int64_t OW, const T* x, T* y) {
  indexed::adaptive_avg_pool2d_forward(ex, planes, H, W, OH, OW, x, y);
}

template <class T>
void adaptive_avg_pool2d_backward(const CpuExecutor&, std::int64_t planes, std::int64_t H, std::int64_t W,
                                  std::int64_t OH, std::int64_t OW, const T* gy, T* gx) {
  ProfiledOp profiled("pool_backward");
  adaptive_avg_pool2d_backward(planes, H, W, OH, OW, gy, gx);
}
template <class Ex, class T>
void adaptive_avg_pool2d_backward(const Ex& ex, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                                  std::int64_t OW, const T* gy, T* gx) {
  indexed::adaptive_avg_pool2d_backward(ex, planes, H, W, OH, OW, gy, gx);
}

}  // namespace ptrain::kernels
