#pragma once
// The dispatch point of linear's forward (autograd/ops/linear.hpp), the executor first: the CPU
// writes the bias into y and lets the GEMM add x W^T onto it (beta 1); other executors run the
// GEMM, then add the bias in a kernel. The GEMMs themselves are the executor's (ex.gemm).
#include <algorithm>
#include <cstdint>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"

namespace ptrain::kernels {

// y [batch, out] = x [batch, in] w^T [in, out] + b [out] (b null: none).
template <class T>
void linear_forward(const CpuExecutor&, std::int64_t batch, std::int64_t in, std::int64_t out, const T* x, const T* w,
                    const T* b, T* y) {
  ProfiledOp profiled("gemm");
  if (b)
    for (std::int64_t r = 0; r < batch; ++r) std::copy(b, b + out, y + r * out);
  gemm<T>(false, true, batch, out, in, T(1), x, in, w, in, b ? T(1) : T(0), y, out);
}
template <class Ex, class T>
void linear_forward(const Ex& ex, std::int64_t batch, std::int64_t in, std::int64_t out, const T* x, const T* w,
                    const T* b, T* y) {
  ex.template gemm<T>(false, true, batch, out, in, 1, x, in, w, in, 0, y, out);
  if (b) indexed::add_bias(ex, y, b, batch, out, 1);
}

}  // namespace ptrain::kernels
