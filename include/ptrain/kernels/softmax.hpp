#pragma once
// The dispatch points of softmax and log_softmax (autograd/ops/activation.hpp), the executor
// first: CpuExecutor reaches kernels/cpu/softmax.hpp, any other executor the row reductions of
// kernels/indexed/softmax.hpp; the masked softmax of attention likewise.
#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/softmax.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/geometry/layout.hpp"
#include "ptrain/kernels/indexed/softmax.hpp"

namespace ptrain::kernels {

template <class T>
void softmax_forward(const CpuExecutor&, const T* x, T* y, const ReductionLayout& l, bool take_log) {
  ProfiledOp profiled("softmax");
  softmax_forward(x, y, l, take_log);
}
template <class Ex, class T>
void softmax_forward(const Ex& ex, const T* x, T* y, const ReductionLayout& l, bool take_log) {
  indexed::softmax_forward(ex, x, y, l, take_log);
}

template <class T>
void softmax_backward(const CpuExecutor&, const T* y, const T* gy, T* gx, const ReductionLayout& l, bool take_log) {
  ProfiledOp profiled("softmax");
  softmax_backward(y, gy, gx, l, take_log);
}
template <class Ex, class T>
void softmax_backward(const Ex& ex, const T* y, const T* gy, T* gx, const ReductionLayout& l, bool take_log) {
  indexed::softmax_backward(ex, y, gy, gx, l, take_log);
}

// y = softmax(x + mask) over rows of length n, a row masked everywhere giving zeros.
template <class T>
void masked_softmax_forward(const CpuExecutor&, const T* x, const T* mask, const BroadcastIndex& mask_at, T* y,
                            std::int64_t rows, std::int64_t n) {
  ProfiledOp profiled("softmax");
  masked_softmax_forward(x, mask, mask_at, y, rows, n);
}
template <class Ex, class T>
void masked_softmax_forward(const Ex& ex, const T* x, const T* mask, const BroadcastIndex& mask_at, T* y,
                            std::int64_t rows, std::int64_t n) {
  indexed::masked_softmax_forward(ex, x, mask, mask_at, y, rows, n);
}

}  // namespace ptrain::kernels
