#pragma once
// The dispatch points of the optimizer updates and of mixed precision's gradient unscaling: Cpu's
// executor runs the Eigen chunked updates of kernels/cpu/optim.hpp, any other executor the
// indexed algorithms of kernels/indexed/optim.hpp (whose comments give each contract). SGD's and
// Adam's updates also write the stepped parameter rounded to 16 bits where asked (SixteenBitCopy):
// on the CPU in the same pass, elsewhere in a cast after it. LAMB's
// elementwise passes are the indexed ones on every executor, its norms reduce.hpp's.
#include <cstdint>

#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/optim.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/indexed/elementwise.hpp"
#include "ptrain/kernels/indexed/optim.hpp"
#include "ptrain/kernels/reduce.hpp"

namespace ptrain::kernels {

using indexed::AdamBuffers;
using indexed::LambBuffers;
using indexed::SixteenBitCopy;

namespace detail {
// On an executor other than the CPU's the rounded copy is a pass of its own after the update.
template <class Ex, class T>
void write_rounded(const Ex& ex, const T* param, std::int64_t n, SixteenBitCopy rounded) {
  if (rounded.to_half) indexed::cast(ex, param, rounded.to_half, n);
  if (rounded.to_bfloat16) indexed::cast(ex, param, rounded.to_bfloat16, n);
}
}  // namespace detail

template <class T, class Options>
void sgd_step(const CpuExecutor&, const Options& options, T* param, const T* grad, T* momentum_buffer, bool first_step,
              std::int64_t n, SixteenBitCopy rounded = {}) {
  ProfiledOp profiled("optimizer");
  cpu::sgd_step(options, param, grad, momentum_buffer, first_step, n, rounded);
}
template <class Ex, class T, class Options>
void sgd_step(const Ex& ex, const Options& options, T* param, const T* grad, T* momentum_buffer, bool first_step,
              std::int64_t n, SixteenBitCopy rounded = {}) {
  indexed::sgd_step(ex, options, param, grad, momentum_buffer, first_step, n);
  detail::write_rounded(ex, param, n, rounded);
}

template <class T, class Options>
void adam_step(const CpuExecutor&, const Options& options, std::int64_t step, T* param, const T* grad,
               const AdamBuffers<T>& state, std::int64_t n, SixteenBitCopy rounded = {}) {
  ProfiledOp profiled("optimizer");
  cpu::adam_step<false>(options, step, param, grad, state, n, rounded);
}
template <class Ex, class T, class Options>
void adam_step(const Ex& ex, const Options& options, std::int64_t step, T* param, const T* grad,
               const AdamBuffers<T>& state, std::int64_t n, SixteenBitCopy rounded = {}) {
  indexed::adam_step(ex, options, step, param, grad, state, n);
  detail::write_rounded(ex, param, n, rounded);
}

template <class T, class Options>
void adamw_step(const CpuExecutor&, const Options& options, std::int64_t step, T* param, const T* grad,
                const AdamBuffers<T>& state, std::int64_t n, SixteenBitCopy rounded = {}) {
  ProfiledOp profiled("optimizer");
  cpu::adam_step<true>(options, step, param, grad, state, n, rounded);
}
template <class Ex, class T, class Options>
void adamw_step(const Ex& ex, const Options& options, std::int64_t step, T* param, const T* grad,
                const AdamBuffers<T>& state, std::int64_t n, SixteenBitCopy rounded = {}) {
  indexed::adamw_step(ex, options, step, param, grad, state, n);
  detail::write_rounded(ex, param, n, rounded);
}

// Lamb<T, D>'s update of one parameter at its step number `step`, on every executor: the moments
// and the update (indexed), the sums of squares of the parameter and the update (reduce.hpp's,
// Eigen's on the CPU), the trust ratio and the step (indexed). weight_decay is the parameter's: the
// options' or 0 for a parameter exempt from it. options: a LambOptions (optim/lamb.hpp).
template <class Ex, class T, class Options>
void lamb_step(const Ex& ex, const Options& options, std::int64_t step, double weight_decay, T* param,
               const T* grad, const LambBuffers<T>& state, std::int64_t n) {
  indexed::lamb_moments(ex, options, step, weight_decay, param, grad, state, n);
  sum_of_squares(ex, param, n, state.norms);
  sum_of_squares(ex, state.update, n, state.norms + 1);
  indexed::lamb_apply(ex, options.lr, param, state, n);
}

template <class From, class To>
void unscale_gradients(const CpuExecutor&, const From* grad, To* master_grad, std::int64_t n, double scale,
                       std::int32_t* found_inf) {
  ProfiledOp profiled("optimizer");
  cpu::unscale_gradients(grad, master_grad, n, scale, found_inf);
}
template <class Ex, class From, class To>
void unscale_gradients(const Ex& ex, const From* grad, To* master_grad, std::int64_t n, double scale,
                       std::int32_t* found_inf) {
  indexed::unscale_gradients(ex, grad, master_grad, n, scale, found_inf);
}

}  // namespace ptrain::kernels
