#pragma once
// cross_entropy on a device other than Cpu (HostEmulated, Cuda): the fused kernels of
// kernels/indexed/loss.hpp through executor_for<D>, with the CPU op's signature.
//
// Targets come from the host, as the data loader yields them and as the CPU op takes them: they
// are checked there (a class out of range would make the kernels read outside a row), copied to
// the device once per call (positions int64s) and kept there for backward. The incoming gradient
// stays on the device too: backward multiplies by it in a kernel rather than reading it back.
#include <cstdint>
#include <span>

#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed.hpp"
#include "ptrain/kernels/indexed/loss.hpp"

namespace ptrain {

namespace detail {
// x[i] *= factor[0], factor a one-element device tensor (the gradient of a scalar loss).
template <class T>
struct MultiplyByScalarAt {
  T* x;
  const T* factor;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    x[i] = kernels::from_accumulate<T>(kernels::to_accumulate(x[i]) * kernels::to_accumulate(factor[0]));
  }
};
}  // namespace detail

// torch.nn.functional.cross_entropy(logits, targets, label_smoothing, reduction mean), as the CPU
// op (autograd/ops/loss.hpp): scores [N, C] or [N, C, d1, ...], one host target per position,
// grad_scale multiplying only the gradient sent to the logits.
template <class T, kernels::ExecutorDevice D>
Var<T, D> cross_entropy(const Var<T, D>& logits, std::span<const std::int64_t> targets,
                        double label_smoothing = 0.0, double grad_scale = 1.0) {
  const auto layout = detail::cross_entropy_layout(logits.shape(), targets, label_smoothing);
  const std::int64_t positions = layout.outer * layout.inner;
  Tensor<std::int64_t, D> device_targets(Shape{positions});
  D::copy_from_host(device_targets.data(), targets.data(), static_cast<std::size_t>(positions));
  const kernels::executor_for<D> ex;
  Tensor<accumulate_t<T>, D> lse(Shape{positions});
  Tensor<T, D> y(Shape{});
  kernels::indexed::cross_entropy_forward<T, T>(ex, logits.value().data(), device_targets.data(), lse.data(), layout,
                                                label_smoothing, 1.0 / static_cast<double>(positions), y.data());
  return make_var<T, D>(
      std::move(y), {logits}, "cross_entropy",
      [device_targets, lse, layout, label_smoothing, positions, grad_scale](Node<T, D>& self) {
        const kernels::executor_for<D> ex;
        const Tensor<T, D>& x = self.inputs[0]->value;
        Tensor<T, D> gx(x.shape());
        const auto scale = static_cast<accumulate_t<T>>(grad_scale / static_cast<double>(positions));
        kernels::indexed::cross_entropy_backward(ex, x.data(), device_targets.data(), lse.data(), scale, gx.data(),
                                                 layout, label_smoothing);
        ex.indexed(gx.numel(), detail::MultiplyByScalarAt<T>{gx.data(), self.grad.data()});
        self.inputs[0]->accumulate(std::move(gx));
      });
}

}  // namespace ptrain
